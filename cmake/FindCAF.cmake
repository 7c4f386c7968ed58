# Finds the C++ Actor Framework 0.17 from Debian's libcaf-dev, which ships no CMake config.
# Defines the imported targets caf::core, caf::io and caf::openssl.
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
find_library(CAF_IO_LIBRARY caf_io)
find_library(CAF_OPENSSL_LIBRARY caf_openssl)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF DEFAULT_MSG CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
                                  CAF_OPENSSL_LIBRARY)
if(CAF_FOUND AND NOT TARGET caf::core)
  add_library(caf::core UNKNOWN IMPORTED)
  set_target_properties(caf::core PROPERTIES IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
                                             INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
  add_library(caf::io UNKNOWN IMPORTED)
  set_target_properties(caf::io PROPERTIES IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
                                           INTERFACE_LINK_LIBRARIES caf::core)
  if(CAF_OPENSSL_LIBRARY)
    add_library(caf::openssl UNKNOWN IMPORTED)
    set_target_properties(caf::openssl PROPERTIES IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
                                                  INTERFACE_LINK_LIBRARIES caf::io)
  endif()
endif()

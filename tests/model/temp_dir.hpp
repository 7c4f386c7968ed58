// A folder of its own for each model test (named after the test and this process), removed
// whatever the test's outcome.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace degnn::testing {

struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& prefix) {
    path = std::filesystem::temp_directory_path() /
           (prefix + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace degnn::testing

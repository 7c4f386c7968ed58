// A joiner's side of the partition-file transfer: its seed's manifest, and fetching files of it
// through the seed's node actor (a window of chunk requests at a time), with a line per file
// and a summary on stderr. The transfer logic itself is runtime/node/partition_transfer.hpp.
#pragma once

#include <caf/all.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/node/node_actor.hpp"
#include "serialization/wire_files.hpp"

namespace degnn {

class seed_file_client {
 public:
  /// Asks `seed` for its manifest; throws naming `seed_address` when it gives none.
  seed_file_client(caf::actor_system& sys, node_actor seed, const std::string& seed_address,
                   std::filesystem::path dir);

  /// Brings `paths` into the folder (see fetch_files). `progress(done, total)` after each window.
  void fetch(const std::vector<std::string>& paths,
             const std::function<void(std::uint64_t, std::uint64_t)>& progress = {});

  const wire::file_manifest& manifest() const { return manifest_; }

 private:
  caf::actor_system& sys_;
  caf::scoped_actor self_;
  node_actor seed_;
  std::filesystem::path dir_;
  wire::file_manifest manifest_;
};

}  // namespace degnn

// Fetching partition files from the seed's node actor.
#include "runtime/node/seed_file_client.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime/node/partition_transfer.hpp"

namespace degnn {

seed_file_client::seed_file_client(caf::actor_system& sys, node_actor seed,
                                   const std::string& seed_address, std::filesystem::path dir)
    : sys_(sys), self_(sys), seed_(std::move(seed)), dir_(std::move(dir)) {
  std::string failure;
  self_->request(seed_, std::chrono::seconds(30), manifest_atom_v)
      .receive([&](std::vector<char>& b) { manifest_ = wire::decode_file_manifest({}, b); },
               [&](caf::error& e) { failure = sys_.render(e); });
  if (!failure.empty()) {
    throw std::runtime_error("joiner: the seed at " + seed_address +
                             " listed no partition files: " + failure);
  }
  std::filesystem::create_directories(dir_);
}

void seed_file_client::fetch(const std::vector<std::string>& paths,
                             const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  // All chunk requests of a window go out at once; the replies are taken in order.
  auto ask = [&](const std::vector<std::vector<char>>& reqs) {
    using handle =
        decltype(self_->request(seed_, std::chrono::seconds(60), chunk_atom_v, reqs.front()));
    std::vector<handle> pending;
    for (const auto& r : reqs)
      pending.push_back(self_->request(seed_, std::chrono::seconds(60), chunk_atom_v, r));
    std::vector<std::vector<char>> replies(reqs.size());
    std::string failure;
    for (size_t i = 0; i < pending.size(); ++i) {
      pending[i].receive([&](std::vector<char>& r) { replies[i] = std::move(r); },
                         [&](caf::error& e) { failure = sys_.render(e); });
    }
    if (!failure.empty()) throw std::runtime_error("fetching from the seed: " + failure);
    return replies;
  };
  const auto st = fetch_files(
      dir_, manifest_, paths, ask, wire::context{}, 256u << 10, 4,
      [](const std::string& line) { std::fprintf(stderr, "joiner: %s\n", line.c_str()); },
      progress);
  if (st.files_fetched > 0) {
    std::fprintf(stderr, "joiner: fetched %d files, %.1f MB in %.2f s (%.0f MB/s); %d present\n",
                 st.files_fetched, static_cast<double>(st.bytes) / 1e6, st.seconds,
                 static_cast<double>(st.bytes) / 1e6 / std::max(st.seconds, 1e-9),
                 st.files_present);
  }
}

}  // namespace degnn

// Network namespaces a test makes and removes (root only): a switch namespace NAME-sw holding a
// bridge, and NAME-0..N-1 with node K at 198.18.0.K+1 behind a 1 Gbit/s veth, so the host's own
// network is never touched. Shared by the multi-process tests that need real links to cut.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

namespace degnn::test {

inline bool run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

// Namespaces NAME-sw (a bridge) and NAME-0..3 (node K at 198.18.0.K+1), removed on destruction.
struct namespaces {
  std::string name;
  int nodes;
  bool ok = true;
  namespaces(std::string n, int k) : name(std::move(n)), nodes(k) {
    const std::string sw = name + "-sw";
    ok = run("ip netns add " + sw) && run("ip -n " + sw + " link add br0 type bridge") &&
         run("ip -n " + sw + " link set br0 up");
    for (int i = 0; ok && i < nodes; ++i) {
      const std::string ns = ns_of(i), a = "v" + std::to_string(i) + "a",
                        b = "v" + std::to_string(i) + "b";
      // 1 Gbit/s both ways, burst 4 ms at the rate.
      const std::string tbf = " root tbf rate 1gbit burst 500000 latency 20ms";
      ok = run("ip netns add " + ns) &&
           run("ip -n " + sw + " link add " + a + " type veth peer name " + b + " netns " + ns) &&
           run("ip -n " + sw + " link set " + a + " master br0 up") &&
           run("ip -n " + ns + " link set lo up") &&
           run("ip -n " + ns + " addr add " + address(i) + "/24 dev " + b) &&
           run("ip -n " + ns + " link set " + b + " up") &&
           run("ip netns exec " + ns + " tc qdisc replace dev " + b + tbf) &&
           run("ip netns exec " + sw + " tc qdisc replace dev " + a + tbf);
    }
  }
  ~namespaces() {
    for (int i = 0; i < nodes; ++i)
      run("ip netns pids " + ns_of(i) + " | xargs -r kill -9; ip netns del " + ns_of(i));
    run("ip netns del " + name + "-sw");
  }
  std::string ns_of(int i) const { return name + "-" + std::to_string(i); }
  static std::string address(int i) { return "198.18.0." + std::to_string(i + 1); }

  /// Drops, in node i's namespace (nftables), every packet between node i and `others`, or every
  /// packet but loopback when `others` is empty: a cut link, silent both ways. heal(i) undoes it.
  bool cut(int i, const std::vector<int>& others = {}) const {
    const std::string nft = "ip netns exec " + ns_of(i) + " nft ";
    std::string in = "iifname != lo", out = "oifname != lo";
    if (!others.empty()) {
      std::string set;
      for (int o : others)
        set += (set.empty() ? "" : ", ") + address(o);
      in = "ip saddr { " + set + " }";
      out = "ip daddr { " + set + " }";
    }
    return run(nft + "add table inet degnn_cut") &&
           run(nft + "'add chain inet degnn_cut in { type filter hook input priority 0; }'") &&
           run(nft + "'add chain inet degnn_cut out { type filter hook output priority 0; }'") &&
           run(nft + "'add rule inet degnn_cut in " + in + " drop'") &&
           run(nft + "'add rule inet degnn_cut out " + out + " drop'");
  }
  bool heal(int i) const {
    return run("ip netns exec " + ns_of(i) + " nft delete table inet degnn_cut");
  }
};

}  // namespace degnn::test

// PT-Scotch over MPI (see ptscotch_partition.hpp). Memory per rank: its 1/R of the arcs (twice:
// Scotch's graph, then the in-arcs of the parts it writes), about 28 bytes a node (labels, the
// outline's empty CSR offsets, the book with its owner vector, in-degrees), one part's CSR while
// it is written, and the mapped feature pages it reads.
#include "runtime/partition/ptscotch_partition.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "model/data_error.hpp"
#include "model/dataset_arrays.hpp"
#include "model/mapped_file.hpp"
#include "model/partition_store.hpp"
#include "runtime/partition/ptscotch_graph.hpp"
#include "runtime/process/config_error.hpp"
#include "runtime/process/process_stats.hpp"

namespace degnn {

namespace {

using ptscotch::balance;
using ptscotch::local_graph;
using ptscotch::rank_info;

constexpr std::int64_t kEdgesPerRound = std::int64_t{1} << 22;  // edges read per exchange round

// MPI_Init_thread / MPI_Finalize for the scope of a run.
struct mpi_scope {
  int provided = 0;
  mpi_scope() { MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided); }
  ~mpi_scope() { MPI_Finalize(); }
  mpi_scope(const mpi_scope&) = delete;
  mpi_scope& operator=(const mpi_scope&) = delete;
};

void check_scotch(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string("PT-Scotch: ") + what + " failed");
}

// Scotch's vertex distribution: rank r holds vertices [first[r], first[r+1]).
struct vertex_ranges {
  std::vector<std::int64_t> first;
  vertex_ranges(std::int64_t n, int ranks) : first(static_cast<std::size_t>(ranks) + 1) {
    for (int r = 0; r <= ranks; ++r)
      first[static_cast<std::size_t>(r)] = n * r / ranks;
  }
  int rank_of(std::int64_t v) const {
    return static_cast<int>(std::upper_bound(first.begin(), first.end(), v) - first.begin()) - 1;
  }
};

// Streams this rank's share of the edges in rounds and hands each round's (src, dst) pairs to
// `emit`; every rank runs the same number of rounds, so collectives inside `after_round` match.
template <class Emit, class AfterRound>
void for_my_edges(const std::filesystem::path& dir, const rank_info& me, std::int64_t n, Emit emit,
                  AfterRound after_round) {
  array_stream src = open_edge_index(dir), dst = open_edge_index(dir);
  const std::int64_t m = src.shape()[1];
  const row_share share{me.rank, me.ranks};
  const std::int64_t begin = share.begin(m), end = share.end(m);
  src.skip(begin);
  dst.skip(m + begin);
  std::int64_t rounds = (end - begin + kEdgesPerRound - 1) / kEdgesPerRound;
  MPI_Allreduce(MPI_IN_PLACE, &rounds, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  std::vector<std::int64_t> u, v;
  for (std::int64_t round = 0, at = begin; round < rounds; ++round) {
    const std::int64_t count = std::min(kEdgesPerRound, end - at);
    u.resize(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
    v.resize(u.size());
    if (count > 0) {
      src.read(u.data(), u.size());
      dst.read(v.data(), v.size());
      at += count;
    }
    for (std::size_t i = 0; i < u.size(); ++i) {
      for (const auto& [row, id] : {std::pair{0, u[i]}, {1, v[i]}}) {
        if (id < 0 || id >= n)
          throw data_error::at(src.where(), 0,
                               "edge_index[" + std::to_string(row) + "][" +
                                   std::to_string(at - count + static_cast<std::int64_t>(i)) +
                                   "]: node id " + std::to_string(id) + " out of range [0, " +
                                   std::to_string(n) + ")");
      }
      emit(u[i], v[i]);
    }
    after_round();
  }
}

// Sends each rank its bucket and appends what arrives to `into`; the buckets are emptied.
void exchange(std::vector<std::vector<std::uint64_t>>& buckets, std::vector<std::uint64_t>& into) {
  const auto ranks = static_cast<int>(buckets.size());
  std::vector<int> send_counts(static_cast<std::size_t>(ranks)), recv_counts(send_counts.size());
  for (int r = 0; r < ranks; ++r)
    send_counts[static_cast<std::size_t>(r)] =
        static_cast<int>(buckets[static_cast<std::size_t>(r)].size());
  MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> send_at(send_counts.size()), recv_at(send_counts.size());
  // MPI's counts and offsets are ints: a round's data must stay below 2^31 elements each way.
  auto total = [](const std::vector<int>& c) {
    return std::accumulate(c.begin(), c.end(), std::int64_t{0});
  };
  if (total(send_counts) > INT_MAX || total(recv_counts) > INT_MAX)
    throw std::runtime_error("an exchange round of more than 2^31 arcs (too many ranks)");
  std::exclusive_scan(send_counts.begin(), send_counts.end(), send_at.begin(), 0);
  std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_at.begin(), 0);
  std::vector<std::uint64_t> out;
  out.reserve(static_cast<std::size_t>(send_at.back() + send_counts.back()));
  for (auto& b : buckets) {
    out.insert(out.end(), b.begin(), b.end());
    b.clear();
  }
  const std::size_t old = into.size();
  into.resize(old + static_cast<std::size_t>(recv_at.back() + recv_counts.back()));
  MPI_Alltoallv(out.data(), send_counts.data(), send_at.data(), MPI_UINT64_T, into.data() + old,
                recv_counts.data(), recv_at.data(), MPI_UINT64_T, MPI_COMM_WORLD);
}

void sort_unique(std::vector<std::uint64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  v.shrink_to_fit();
}

constexpr std::uint64_t pack(std::int64_t hi, std::int64_t lo) {
  return static_cast<std::uint64_t>(hi) << 32 | static_cast<std::uint64_t>(lo);
}

local_graph read_scotch_graph(const std::filesystem::path& dir, const rank_info& me,
                              const vertex_ranges& ranges) {
  std::vector<std::vector<std::uint64_t>> buckets(static_cast<std::size_t>(me.ranks));
  std::vector<std::uint64_t> arcs;
  for_my_edges(
      dir, me, ranges.first.back(),
      [&](std::int64_t u, std::int64_t v) {
        if (u == v) return;
        buckets[static_cast<std::size_t>(ranges.rank_of(u))].push_back(pack(u, v));
        buckets[static_cast<std::size_t>(ranges.rank_of(v))].push_back(pack(v, u));
      },
      [&] { exchange(buckets, arcs); });
  sort_unique(arcs);
  local_graph g;
  g.first = ranges.first[static_cast<std::size_t>(me.rank)];
  const std::int64_t count = ranges.first[static_cast<std::size_t>(me.rank) + 1] - g.first;
  if (static_cast<std::uint64_t>(arcs.size()) > std::uint64_t{0x7fffffff})
    throw std::runtime_error("PT-Scotch: more than 2^31 arcs on one rank; run more ranks");
  g.vert.assign(static_cast<std::size_t>(count) + 1, 0);
  g.edges.resize(arcs.size());
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    const auto local = static_cast<std::size_t>(static_cast<std::int64_t>(arcs[i] >> 32) - g.first);
    ++g.vert[local + 1];
    g.edges[i] = static_cast<SCOTCH_Num>(arcs[i] & 0xffffffffu);
  }
  std::partial_sum(g.vert.begin(), g.vert.end(), g.vert.begin());
  return g;
}

SCOTCH_Num strategy_flags(const std::string& name) {
  if (name == "quality") return SCOTCH_STRATQUALITY;
  if (name == "default") return SCOTCH_STRATDEFAULT;
  if (name == "speed") return SCOTCH_STRATSPEED;
  if (name == "scalability") return SCOTCH_STRATSCALABILITY;
  throw config_error("partition: --strategy " + name +
                     ": expected quality, default, speed or scalability");
}

std::vector<std::int32_t> scotch_parts(local_graph& g, int parts, std::uint64_t seed,
                                       const std::string& strategy, const rank_info& me,
                                       std::int64_t n) {
  std::int64_t arcs = static_cast<std::int64_t>(g.edges.size());
  MPI_Allreduce(MPI_IN_PLACE, &arcs, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (arcs > 0x7fffffff)
    throw std::runtime_error("PT-Scotch (32-bit build): the graph has " + std::to_string(arcs) +
                             " arcs, more than 2^31");
  // A context with a fixed seed and Scotch's deterministic option: the same book for the same
  // graph, seed and ranks (without it, Scotch's threads make each run's cut a little different).
  SCOTCH_Context context;
  check_scotch(SCOTCH_contextInit(&context), "contextInit");
  SCOTCH_contextRandomSeed(&context, static_cast<SCOTCH_Num>(seed & 0x7fffffff));
  check_scotch(SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMDETERMINISTIC, 1),
               "contextOptionSetNum(deterministic)");
  check_scotch(SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1),
               "contextOptionSetNum(fixed seed)");
  SCOTCH_Dgraph graph, bound;
  check_scotch(SCOTCH_dgraphInit(&graph, MPI_COMM_WORLD), "dgraphInit");
  const auto nloc = static_cast<SCOTCH_Num>(g.vertices());
  const auto eloc = static_cast<SCOTCH_Num>(g.edges.size());
  check_scotch(SCOTCH_dgraphBuild(&graph, 0, nloc, nloc, g.vert.data(), g.vert.data() + 1, nullptr,
                                  nullptr, eloc, eloc, g.edges.data(), nullptr, nullptr),
               "dgraphBuild");
  check_scotch(SCOTCH_dgraphInit(&bound, MPI_COMM_WORLD), "dgraphInit");
  check_scotch(SCOTCH_contextBindDgraph(&context, &graph, &bound), "contextBindDgraph");
  SCOTCH_Strat strat;
  check_scotch(SCOTCH_stratInit(&strat), "stratInit");
  check_scotch(SCOTCH_stratDgraphMapBuild(&strat, strategy_flags(strategy), me.ranks, parts,
                                          partition_balance_tolerance),
               "stratDgraphMapBuild");
  std::vector<SCOTCH_Num> mine(static_cast<std::size_t>(nloc));
  const int rc = SCOTCH_dgraphPart(&bound, parts, &strat, mine.data());
  SCOTCH_stratExit(&strat);
  SCOTCH_dgraphExit(&bound);
  SCOTCH_dgraphExit(&graph);
  SCOTCH_contextExit(&context);
  check_scotch(rc, "dgraphPart");
  // Every rank gets the whole owner vector (4 bytes a node).
  std::vector<int> counts(static_cast<std::size_t>(me.ranks)), at(counts.size());
  const int my_count = static_cast<int>(nloc);
  MPI_Allgather(&my_count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::exclusive_scan(counts.begin(), counts.end(), at.begin(), 0);
  std::vector<std::int32_t> owner(static_cast<std::size_t>(n));
  MPI_Allgatherv(mine.data(), my_count, MPI_INT32_T, owner.data(), counts.data(), at.data(),
                 MPI_INT32_T, MPI_COMM_WORLD);
  return owner;
}

// The in-arcs (dst << 32 | src) of the parts this rank writes (part p goes to rank p % R), as
// the dataset's CSR holds them: symmetrized unless the dataset is directed, repeats dropped,
// self loops kept. Sorted by (part, dst, src), so each part is one run.
std::vector<std::uint64_t> read_part_arcs(const std::filesystem::path& dir, const rank_info& me,
                                          bool directed, std::span<const std::int32_t> owner) {
  std::vector<std::vector<std::uint64_t>> buckets(static_cast<std::size_t>(me.ranks));
  std::vector<std::uint64_t> arcs;
  auto writer_of = [&](std::int64_t v) {
    return static_cast<std::size_t>(owner[static_cast<std::size_t>(v)] % me.ranks);
  };
  for_my_edges(
      dir, me, static_cast<std::int64_t>(owner.size()),
      [&](std::int64_t u, std::int64_t v) {
        buckets[writer_of(v)].push_back(pack(v, u));
        if (!directed && u != v) buckets[writer_of(u)].push_back(pack(u, v));
      },
      [&] { exchange(buckets, arcs); });
  auto part_of = [&](std::uint64_t a) { return owner[static_cast<std::size_t>(a >> 32)]; };
  std::sort(arcs.begin(), arcs.end(), [&](std::uint64_t a, std::uint64_t b) {
    const auto pa = part_of(a), pb = part_of(b);
    return pa != pb ? pa < pb : a < b;
  });
  arcs.erase(std::unique(arcs.begin(), arcs.end()), arcs.end());
  arcs.shrink_to_fit();
  return arcs;
}

void log_phase(const rank_info& me, const char* what, double secs) {
  if (me.lead())
    std::fprintf(stderr, "  %s in %.1f s, rank 0 peak RSS %.0f MiB\n", what, secs, peak_rss_mib());
}

ptscotch_report run_rank(const ptscotch_settings& s, const rank_info& me) {
  ptscotch_report report;
  report.rank = me.rank;
  report.ranks = me.ranks;
  stopwatch clock;
  if (me.lead())
    std::fprintf(stderr, "partitioning %s with PT-Scotch on %d ranks ...\n", s.data.c_str(),
                 me.ranks);
  const dataset outline = load_array_outline(s.data, {me.rank, me.ranks}, me.lead());
  const node_id n = outline.num_nodes();
  if (s.parts > n)
    throw config_error("partition: --parts " + std::to_string(s.parts) + " exceeds the " +
                       std::to_string(n) + " nodes");
  report.dataset = outline.name;
  report.num_nodes = n;
  strategy_flags(s.strategy);  // a bad name is refused before any work
  const vertex_ranges ranges(n, me.ranks);
  local_graph g = read_scotch_graph(s.data, me, ranges);
  report.read_s = clock.seconds();
  log_phase(me, "read and distributed the edges", report.read_s);

  clock.reset();
  std::vector<std::int32_t> owner = scotch_parts(g, s.parts, s.seed, s.strategy, me, n);
  report.partition_s = clock.seconds();
  log_phase(me, "partitioned", report.partition_s);

  clock.reset();
  report.moved_train = balance(g, outline.train, s.parts, true, me, owner);
  report.moved_other = balance(g, outline.train, s.parts, false, me, owner);
  g = local_graph{};
  report.balance_s = clock.seconds();
  log_phase(me, "balanced", report.balance_s);

  clock.reset();
  const partition_book book(std::move(owner), s.parts);  // throws on an empty part
  const std::uint64_t book_sum = owner_checksum(book.owners());
  std::vector<std::uint64_t> arcs = read_part_arcs(s.data, me, outline.directed, book.owners());
  std::vector<std::int32_t> in_degree(static_cast<std::size_t>(n), 0);
  for (std::uint64_t a : arcs)
    ++in_degree[static_cast<std::size_t>(a >> 32)];
  MPI_Allreduce(MPI_IN_PLACE, in_degree.data(), static_cast<int>(n), MPI_INT32_T, MPI_SUM,
                MPI_COMM_WORLD);
  if (me.lead()) std::filesystem::create_directories(s.out);
  MPI_Barrier(MPI_COMM_WORLD);
  // Per part: in-edges, cut in-edges, halo (summed at rank 0 into the quality figures).
  std::vector<std::int64_t> figures(3 * static_cast<std::size_t>(s.parts), 0);
  std::size_t at = 0;
  for (int part = me.rank; part < s.parts; part += me.ranks) {
    std::size_t end = at;
    while (end < arcs.size() && book.owner(static_cast<node_id>(arcs[end] >> 32)) == part)
      ++end;
    graph_partition p = assemble_partition(
        outline, book, part, std::span<const std::uint64_t>(arcs.data() + at, end - at), in_degree);
    at = end;
    const std::filesystem::path file = partition_file(s.out, part);
    std::filesystem::create_directories(file.parent_path());
    write_partition_file(file, p, book_sum, outline.mapped_features.get());
    figures[3 * static_cast<std::size_t>(part)] = p.num_edges();
    figures[3 * static_cast<std::size_t>(part) + 1] =
        std::count(p.src_local.begin(), p.src_local.end(), -1);
    figures[3 * static_cast<std::size_t>(part) + 2] = static_cast<std::int64_t>(p.halo.size());
    if (me.lead() || me.ranks == 1)
      std::fprintf(stderr, "  wrote part %d (%d nodes, %lld in-edges)\n", part, p.num_owned(),
                   static_cast<long long>(p.num_edges()));
  }
  arcs = {};
  MPI_Allreduce(MPI_IN_PLACE, figures.data(), static_cast<int>(figures.size()), MPI_INT64_T,
                MPI_SUM, MPI_COMM_WORLD);
  partition_quality& q = report.quality;
  q.num_parts = s.parts;
  q.nodes.resize(static_cast<std::size_t>(s.parts));
  q.train_nodes.assign(static_cast<std::size_t>(s.parts), 0);
  q.halo.resize(static_cast<std::size_t>(s.parts));
  for (int p = 0; p < s.parts; ++p) {
    const auto k = static_cast<std::size_t>(p);
    q.nodes[k] = book.num_owned(p);
    q.num_edges += figures[3 * k];
    q.cut_edges += figures[3 * k + 1];
    q.halo[k] = static_cast<node_id>(figures[3 * k + 2]);
  }
  for (node_id v : outline.train)
    ++q.train_nodes[static_cast<std::size_t>(book.owner(v))];
  set_quality_ratios(q);
  MPI_Barrier(MPI_COMM_WORLD);  // every part is on disk before the book and the meta file
  if (me.lead()) {
    write_partition_book(s.out, book.owners(), s.parts);
    partition_meta m;
    m.format_version = kPartitionFormatVersion;
    m.dataset_name = outline.name;
    m.num_nodes = n;
    m.num_edges = q.num_edges;
    m.num_features = outline.num_features();
    m.num_classes = outline.num_classes;
    m.num_parts = s.parts;
    m.method = "ptscotch";
    m.seed = s.seed;
    m.owner_checksum = book_sum;
    m.source = std::filesystem::absolute(s.data).string();
    write_partition_meta(s.out, m);
  }
  report.write_s = clock.seconds();
  double rss = peak_rss_mib();
  report.peak_rss_mib.resize(static_cast<std::size_t>(me.ranks));
  MPI_Gather(&rss, 1, MPI_DOUBLE, report.peak_rss_mib.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return report;
}

}  // namespace

bool ptscotch_available() {
  return true;
}

ptscotch_report run_ptscotch_partition(const ptscotch_settings& s) {
  mpi_scope mpi;
  rank_info me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &me.ranks);
  try {
    // Every rank gets the same answer, so all of them stop here alike.
    if (mpi.provided < MPI_THREAD_MULTIPLE)
      throw std::runtime_error("this MPI gives thread level " + std::to_string(mpi.provided) +
                               ", PT-Scotch's threads need MPI_THREAD_MULTIPLE");
    return run_rank(s, me);
  } catch (const std::exception& e) {
    // The other ranks may be waiting in a collective for this one: end them all.
    std::fprintf(stderr, "error: partition (rank %d of %d): %s\n", me.rank, me.ranks, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    throw;
  }
}

}  // namespace degnn

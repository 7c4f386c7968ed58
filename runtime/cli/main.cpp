// degnn: distributed mini-batch GNN training with decentralized batch processing.
// Run `degnn help` for the commands; `degnn COMMAND --help` for a command's options.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "runtime/cli/commands.hpp"
#include "runtime/process/heap_tuning.hpp"

namespace {

void print_help() {
  std::printf(
      "usage: degnn COMMAND [--option value ...]\n\n"
      "commands:\n"
      "  train      train a GNN (GraphSAGE or GCN) and report test accuracy\n"
      "  infer      predictions and embeddings of every node from a trained model (.npy files)\n"
      "  export     a checkpoint's model as safetensors or npz, in DGL's names (PyTorch reads it)\n"
      "  node       run one node process of a cluster (joins a seed, or a static peer list)\n"
      "  launch     run a whole cluster on this machine (launch --local N [node options])\n"
      "  console    attach to node 0 of a running cluster (console HOST:PORT [-c CMD])\n"
      "  certs      make a cluster CA, node and operator key pairs and a job token (TLS)\n"
      "  info       describe a dataset directory or a partition set\n"
      "  generate   write a synthetic graph (degree-corrected SBM) as NumPy arrays or CSV\n"
      "  convert    write a dataset (any layout) as NumPy arrays, which are read in place\n"
      "  partition  split a dataset into K partitions on disk (METIS, random, or PT-Scotch\n"
      "             over MPI: mpirun -n R degnn partition --method ptscotch ...)\n"
      "  bench      benchmarks printing JSON lines (bench data | bench train)\n\n"
      "`degnn COMMAND --help` lists a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "-h")) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  // Line by line even into a pipe (degnn launch, a log collector): progress shows as it happens.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // Training allocates and frees large blocks every batch or step: keep them (heap_tuning.hpp).
  if (command == "train" || command == "node" || command == "bench") degnn::keep_freed_heap();
  try {
    if (command == "train") return degnn::run_train(argc - 2, argv + 2);
    if (command == "node") return degnn::run_node(argc - 2, argv + 2);
    if (command == "launch") return degnn::run_launch(argc - 2, argv + 2);
    if (command == "console") return degnn::run_console(argc - 2, argv + 2);
    if (command == "certs") return degnn::run_certs(argc - 2, argv + 2);
    if (command == "info") return degnn::run_info(argc - 2, argv + 2);
    if (command == "generate") return degnn::run_generate(argc - 2, argv + 2);
    if (command == "convert") return degnn::run_convert(argc - 2, argv + 2);
    if (command == "partition") return degnn::run_partition(argc - 2, argv + 2);
    if (command == "bench") return degnn::run_bench(argc - 2, argv + 2);
    if (command == "infer") return degnn::run_infer(argc - 2, argv + 2);
    if (command == "export") return degnn::run_export(argc - 2, argv + 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "degnn %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "degnn: unknown command '%s' (try degnn help)\n", command.c_str());
  return 2;
}

// The degnn subcommands. Each takes argv from the subcommand's first option on, returns the
// process exit code, and reports bad input as one clear line on stderr.
#pragma once

namespace degnn {

int run_info(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_partition(int argc, char** argv);
int run_convert(int argc, char** argv);
int run_bench(int argc, char** argv);
int bench_train(int argc, char** argv);  ///< `degnn bench train`
int run_train(int argc, char** argv);
int run_node(int argc, char** argv);
int run_certs(int argc, char** argv);
int run_launch(int argc, char** argv);
int run_console(int argc, char** argv);
int run_infer(int argc, char** argv);
int run_export(int argc, char** argv);

/// Prints what `degnn info` shows for a partition output directory.
int describe_partition_set(const char* dir);

}  // namespace degnn

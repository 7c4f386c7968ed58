// degnn train: single-process training, or an in-process cluster running a pipeline.
//   degnn train --data data/pubmed --model sage --layers 2 --fanouts 10,25 --hidden 128 --epochs 50
//   degnn train --parts 4 --pipeline centralized ...
#include <cstdio>

#include "model/dataset.hpp"
#include "runtime/cluster_trainer.hpp"
#include "runtime/commands.hpp"
#include "runtime/single_trainer.hpp"
#include "runtime/train_options.hpp"

namespace degnn {

int run_train(int argc, char** argv) {
  option_set opts("train",
                  "degnn train [--config-file=F] [--data DIR --model sage|gcn --epochs N ...]",
                  train_option_specs());
  if (!opts.parse(argc, argv, 0)) return 0;
  const train_settings s = read_train_settings(opts);
  const dataset d = load_dataset(s.data, {.use_cache = true, .cache_path = {}, .verbose = false});
  std::printf(
      "%s: %d nodes, %lld in-edges, %d features, %d classes; %s pipeline, %d part%s, %s %d layers, "
      "fanouts",
      d.name.c_str(), d.num_nodes(), static_cast<long long>(d.graph.num_edges()), d.num_features(),
      d.num_classes, s.pipeline.c_str(), s.parts, s.parts == 1 ? "" : "s", s.model.model.c_str(),
      s.model.num_layers);
  for (size_t i = 0; i < s.fanouts.size(); ++i)
    std::printf("%s%d", i ? "," : " ", s.fanouts[i]);
  std::printf(", hidden %d, batch %d, seed %llu\n", s.model.hidden, s.batch_size,
              static_cast<unsigned long long>(s.seed));
  training_report report(d.name + "/" + s.pipeline, s.metrics, s.progress);
  if (s.pipeline == "single") {
    train_single(s, d, report);
  } else {
    train_cluster(s, d, report);
  }
  report.finish();
  return 0;
}

}  // namespace degnn

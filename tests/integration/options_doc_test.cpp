// docs/options.md's option tables are the commands' own (issue 32 item 3): each block between
// `<!-- options: degnn COMMAND -->` and `<!-- end options -->` must be what `degnn COMMAND
// --help-markdown` prints, so the document cannot drift from --help and the config-file keys.
// scripts/options_doc.sh rewrites the blocks.
#include <gtest/gtest.h>

#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

TEST(OptionsDoc, EveryTableInDocsOptionsIsWhatTheCommandsHelpPrints) {
  temp_dir dir("options-doc");
  std::ifstream doc(fs::path(DEGNN_SOURCE_DIR) / "docs/options.md");
  ASSERT_TRUE(doc) << "docs/options.md";
  const std::string open = "<!-- options: degnn ", close = "<!-- end options -->";
  std::string line, command, block;
  int tables = 0;
  while (std::getline(doc, line)) {
    if (line.rfind(open, 0) == 0) {
      command = line.substr(open.size(), line.size() - open.size() - 4);
      block.clear();
    } else if (line == close) {
      ASSERT_FALSE(command.empty()) << "an end marker without its start";
      std::vector<std::string> args = {DEGNN_BINARY};
      std::istringstream words(command);
      for (std::string w; words >> w;)
        args.push_back(w);
      args.push_back("--help-markdown");
      const fs::path out = dir.path / ("table-" + std::to_string(tables) + ".md");
      child_process p(args, out);
      ASSERT_EQ(p.wait(30s), 0) << command << ": " << read_file(out);
      EXPECT_EQ(block, read_file(out))
          << "docs/options.md's table of degnn " << command
          << " is not what --help-markdown prints: run scripts/options_doc.sh";
      ++tables;
      command.clear();
    } else if (!command.empty()) {
      block += line + "\n";
    }
  }
  EXPECT_TRUE(command.empty()) << "the table of degnn " << command << " has no end marker";
  // train, node, partition, generate, convert, info, bench data, bench train, infer, export,
  // certs.
  EXPECT_EQ(tables, 11);
}

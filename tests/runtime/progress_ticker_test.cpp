// Tests of runtime/process/progress_ticker.hpp: a line every period while it lives, none after.
#include "runtime/process/progress_ticker.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

std::string contents(std::FILE* f) {
  std::string out;
  std::rewind(f);
  char buf[256];
  while (std::fgets(buf, sizeof buf, f))
    out += buf;
  return out;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

}  // namespace

TEST(ProgressTicker, PrintsEveryPeriodWhileItLivesAndNothingAfter) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    const degnn::progress_ticker ticker("set-up", std::chrono::milliseconds(40), out);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  const std::string first = contents(out);
  EXPECT_GE(lines(first), 2) << first;  // about 7 periods passed; a loaded machine may lag
  EXPECT_NE(first.find("set-up: "), std::string::npos) << first;
  EXPECT_NE(first.find(" s so far, resident "), std::string::npos) << first;
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_EQ(contents(out), first) << "a line after the ticker was gone";
  {
    const degnn::progress_ticker quick("quick", std::chrono::seconds(30), out);
  }  // ends at once: no line, and no 30 s wait
  EXPECT_EQ(contents(out), first);
  std::fclose(out);
}

// Commit records: "key value" lines, written through durable_file, read back strictly (every
// key once, nothing else).
#include "model/commit_record.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "model/data_error.hpp"
#include "model/durable_file.hpp"

namespace degnn {
namespace fs = std::filesystem;

namespace {
constexpr const char* kRecordName = "COMMIT";
constexpr const char* kRecordMagic = "degnn-commit 1";
}  // namespace

fs::path replica_checkpoint_dir(const fs::path& dir, int part) {
  return dir / ("part-" + std::to_string(part));
}

std::string checkpoint_file_name(std::uint64_t next_step) {
  return "ckpt-" + std::to_string(next_step) + ".bin";
}

namespace {

// The step of a checkpoint file name "ckpt-S.bin"; nothing for any other name.
std::optional<std::uint64_t> step_of_file(const std::string& name) {
  constexpr std::string_view prefix = "ckpt-", suffix = ".bin";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size() - suffix.size();
  std::uint64_t step = 0;
  const auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last) return std::nullopt;
  return step;
}

// The part-* folders of a run's checkpoint folder.
std::vector<fs::path> replica_folders(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().rfind("part-", 0) == 0)
      out.push_back(entry.path());
  return out;
}

}  // namespace

void write_commit_record(const fs::path& dir, const commit_record& r) {
  std::ostringstream out;
  out << kRecordMagic << "\nnext_step " << r.next_step << "\ncluster_id " << r.cluster_id
      << "\nparts " << r.parts << "\nfile " << r.file << "\nsize " << r.size << "\ncrc " << r.crc
      << "\n";
  write_file_durably(dir / kRecordName, out.str());
  // Keep this commit's file and the newest older one: the previous commit of this run, which a
  // node that has not committed yet may still point at. Older files are garbage, and so are newer
  // ones: they belong to a run abandoned for this resumed one (its COMMIT was just replaced), and
  // keeping them would keep the file this run needs from being the "newest older" one later.
  // The record is written: nothing here may throw any more (a leftover file is only garbage).
  std::error_code ec;
  std::vector<std::pair<std::uint64_t, fs::path>> files;
  // A writer killed mid-write (a crash, kill -9) leaves FILE.tmpPID behind: another process's is
  // garbage now. This process's own is left alone (cheap to keep, and never half-read).
  const std::string own_tmp = ".tmp" + std::to_string(::getpid());
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // The same for an interrupted commit record (COMMIT.tmpPID; found left over after node 0 was
    // killed during a commit).
    const auto tmp = name.find(".bin.tmp");
    const bool stale_record = name.rfind(std::string(kRecordName) + ".tmp", 0) == 0 &&
                              name != std::string(kRecordName) + own_tmp;
    if (stale_record || (name.rfind("ckpt-", 0) == 0 && tmp != std::string::npos &&
                         name.compare(tmp + 4, std::string::npos, own_tmp) != 0)) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
      continue;
    }
    const auto step = step_of_file(name);
    if (step && it->path().filename() != r.file) files.emplace_back(*step, it->path());
  }
  std::optional<std::uint64_t> keep;
  for (const auto& [step, path] : files)
    if (step < r.next_step && (!keep || step > *keep)) keep = step;
  for (const auto& [step, path] : files) {
    if (keep && step == *keep) continue;
    std::error_code ignored;
    fs::remove(path, ignored);
  }
}

std::optional<commit_record> read_commit_record(const fs::path& dir) {
  const fs::path path = dir / kRecordName;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const std::string file = path.string();
  std::string line;
  if (!std::getline(in, line) || line != kRecordMagic)
    throw data_error::at(file, 1,
                         std::string("not a commit record (expected '") + kRecordMagic + "')");
  std::map<std::string, std::string> fields;
  for (std::int64_t n = 2; std::getline(in, line); ++n) {
    const auto space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size())
      throw data_error::at(file, n, "expected 'key value', got '" + line + "'");
    if (!fields.emplace(line.substr(0, space), line.substr(space + 1)).second)
      throw data_error::at(file, n, "key '" + line.substr(0, space) + "' given twice");
  }
  auto number = [&](const char* key) -> std::uint64_t {
    auto it = fields.find(key);
    if (it == fields.end()) throw data_error::at(file, 0, std::string("no '") + key + "' line");
    try {
      std::size_t used = 0;
      const auto v = std::stoull(it->second, &used);
      if (used != it->second.size()) throw std::invalid_argument(key);
      return v;
    } catch (const std::exception&) {
      throw data_error::at(file, 0,
                           std::string("'") + key + "' is not a number: '" + it->second + "'");
    }
  };
  commit_record r;
  r.next_step = number("next_step");
  r.cluster_id = number("cluster_id");
  r.parts = static_cast<std::int32_t>(number("parts"));
  r.size = number("size");
  r.crc = static_cast<std::uint32_t>(number("crc"));
  auto f = fields.find("file");
  if (f == fields.end() || f->second.find('/') != std::string::npos || f->second.empty())
    throw data_error::at(file, 0, "no 'file' line naming a file beside the record");
  r.file = f->second;
  if (fields.size() != 6) throw data_error::at(file, 0, "unknown keys in the record");
  return r;
}

committed_checkpoint load_committed_checkpoint(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw data_error::at(dir.string(), 0, "checkpoint folder not found");
  struct found {
    commit_record record;
    fs::path folder;
  };
  // A replica's own folder, or a run's folder holding part-* folders.
  std::vector<found> records;
  if (auto r = read_commit_record(dir)) {
    records.push_back({*r, dir});
  } else {
    for (const fs::path& folder : replica_folders(dir))
      if (auto rf = read_commit_record(folder)) records.push_back({*rf, folder});
  }
  if (records.empty())
    throw data_error::at(dir.string(), 0,
                         "no committed checkpoint here (no COMMIT in it or its part-* folders)");
  std::uint64_t newest = 0;
  for (const auto& f : records)
    newest = std::max(newest, f.record.next_step);
  // Every replica holds the same file: each copy of the newest commit is checked, the first
  // intact one is used and a damaged or missing copy is restored from it.
  std::optional<found> good;
  std::string bytes;
  std::vector<std::pair<fs::path, std::string>> bad;  // copy, why
  for (const auto& f : records) {
    if (f.record.next_step != newest) continue;
    const fs::path path = f.folder / f.record.file;
    const auto read = read_whole_file(path);
    if (!read) {
      bad.emplace_back(path, "the commit record names it, but it is missing");
    } else if (read->size() != f.record.size || checkpoint_crc(*read) != f.record.crc) {
      bad.emplace_back(path, "size or CRC-32 differs from its commit record (damaged file)");
    } else if (!good) {
      good = f;
      bytes = *read;
    }
  }
  if (!good) {
    std::string why = bad.front().second;
    for (size_t i = 1; i < bad.size(); ++i)
      why += "; and " + bad[i].first.string() + ": " + bad[i].second;
    throw data_error::at(bad.front().first.string(), 0, why);
  }
  for (const auto& [path, why] : bad) {
    const fs::path from = good->folder / good->record.file;
    try {
      write_file_durably(path, bytes);
      std::fprintf(stderr, "checkpoint: %s: %s; restored from %s\n", path.c_str(), why.c_str(),
                   from.c_str());
    } catch (const std::exception& e) {  // the intact copy is enough to resume
      std::fprintf(stderr, "checkpoint: %s: %s; not restored (%s); resuming from %s\n",
                   path.c_str(), why.c_str(), e.what(), from.c_str());
    }
  }
  const fs::path path = good->folder / good->record.file;
  return committed_checkpoint{good->record, good->folder, decode_checkpoint(bytes, path.string())};
}

committed_checkpoint load_checkpoint_of_step(const fs::path& dir, std::uint64_t next_step) {
  if (!fs::is_directory(dir)) throw data_error::at(dir.string(), 0, "checkpoint folder not found");
  std::vector<fs::path> folders{dir};
  for (const fs::path& folder : replica_folders(dir))
    folders.push_back(folder);
  const std::string name = checkpoint_file_name(next_step);
  for (const fs::path& folder : folders) {
    const fs::path path = folder / name;
    const auto read = read_whole_file(path);
    if (!read) continue;
    const std::string& bytes = *read;
    auto record = read_commit_record(folder);
    if (record && record->file == name &&
        (bytes.size() != record->size || checkpoint_crc(bytes) != record->crc))
      throw data_error::at(path.string(), 0,
                           "size or CRC-32 differs from its commit record (damaged file)");
    commit_record r;
    if (record) r = *record;  // the run's id and parts; the step is the one asked for
    r.next_step = next_step;
    r.file = name;
    r.size = bytes.size();
    r.crc = checkpoint_crc(bytes);
    return committed_checkpoint{r, folder, decode_checkpoint(bytes, path.string())};
  }
  throw data_error::at(dir.string(), 0,
                       "no checkpoint of step " + std::to_string(next_step) + " here (" + name +
                           "), but the cluster resumes from it");
}

}  // namespace degnn

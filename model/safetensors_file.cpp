// Safetensors files (see array_file.hpp), after the format's README: a u64 header size, the JSON
// header, then the tensors' bytes, which must tile the data exactly.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/array_file_detail.hpp"

namespace degnn {

using namespace array_detail;

std::string encode_safetensors(std::span<const array_ref> arrays,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const array_ref& a : arrays) {
    const std::size_t n = array_bytes(a);
    header[a.name] = {{"dtype", names_of(a.dtype).safetensors},
                      {"shape", a.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  put<std::uint64_t>(out, text.size());
  out += text;
  for (const array_ref& a : arrays)
    out.append(static_cast<const char*>(a.data), array_bytes(a));
  return out;
}

std::vector<stored_array> decode_safetensors(std::string_view bytes, const std::string& file,
                                             std::map<std::string, std::string>* metadata) {
  const auto header_len = get<std::uint64_t>(bytes, 0, file, "header length");
  if (header_len > bytes.size() - 8 || header_len > (100u << 20))
    throw data_error::at(file, 0,
                         "not a safetensors file (its header length " + std::to_string(header_len) +
                             " does not fit the file)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, header_len));
  } catch (const nlohmann::json::exception& e) {
    throw data_error::at(file, 0, std::string("its header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw data_error::at(file, 0, "its header is not a JSON object");
  const std::string_view data = bytes.substr(8 + header_len);
  std::vector<stored_array> out;
  // The tensors' byte ranges must tile the data exactly, as the safetensors format requires
  // (shared ranges would copy one region many times over).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  std::uint64_t claimed = 0;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__" || !t.is_object() || !t.contains("data_offsets")) continue;
    const auto& o = t["data_offsets"];
    if (o.is_array() && o.size() == 2 && o[0].is_number_unsigned() && o[1].is_number_unsigned() &&
        o[1].get<std::uint64_t>() >= o[0].get<std::uint64_t>())
      claimed += o[1].get<std::uint64_t>() - o[0].get<std::uint64_t>();
  }
  if (claimed > data.size())
    throw data_error::at(file, 0, "its tensors claim more bytes than the file holds");
  for (const auto& [name, t] : header.items()) {
    try {
      if (name == "__metadata__") {
        if (metadata)
          for (const auto& [k, v] : t.items())
            (*metadata)[k] = v.get<std::string>();
        continue;
      }
      stored_array a;
      a.name = name;
      const auto dtype = t.at("dtype").get<std::string>();
      bool known = false;
      for (const auto& d : kDtypes)
        if (dtype == d.safetensors) a.dtype = d.t, known = true;
      if (!known) throw data_error::at(file, 0, name + ": dtype " + dtype + " is not read");
      for (const auto& dim : t.at("shape"))
        if (!dim.is_number_integer())
          throw data_error::at(file, 0, name + ": a dimension that is not an integer");
      a.shape = t.at("shape").get<std::vector<std::int64_t>>();
      for (auto s : a.shape)
        if (s < 0) throw data_error::at(file, 0, name + ": a negative dimension");
      const auto offsets = t.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data.size())
        throw data_error::at(file, 0, name + ": its data offsets lie outside the file");
      if (offsets[1] - offsets[0] !=
          static_cast<std::uint64_t>(elements_of(a.shape, file)) * dtype_size(a.dtype))
        throw data_error::at(file, 0, name + ": its data offsets do not match its shape");
      spans.emplace_back(offsets[0], offsets[1]);
      a.bytes.assign(data.substr(offsets[0], offsets[1] - offsets[0]));
      out.push_back(std::move(a));
    } catch (const nlohmann::json::exception& e) {
      throw data_error::at(file, 0, name + ": " + e.what());
    }
  }
  std::sort(spans.begin(), spans.end());
  std::uint64_t covered = 0;
  for (const auto& [b, e] : spans) {
    if (b != covered)
      throw data_error::at(file, 0, "its tensors' data offsets overlap or leave gaps");
    covered = e;
  }
  if (covered != data.size())
    throw data_error::at(file, 0, "its tensors do not cover its data exactly");
  return out;
}

}  // namespace degnn

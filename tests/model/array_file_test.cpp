// .npy, .npz and safetensors: exact bytes of what we write, round trips, files written the way
// NumPy writes them (a deflated npz entry, zip64 sizes), and damaged or hostile files refused
// with the file's name.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "model/array_file.hpp"
#include "model/crc32.hpp"
#include "model/data_error.hpp"

namespace degnn {
namespace {

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

TEST(ArrayFile, NpyBytesAreNumpysOwnForTheSameArray) {
  const float v[6] = {1, 2, 3, 4, 5, 6};
  const std::string bytes = encode_npy({"x", array_dtype::f32, {2, 3}, v});
  // numpy 1.24's own bytes for np.save of this array: 10 + 118 header bytes, then the data.
  ASSERT_EQ(bytes.size(), 128u + sizeof(v));
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8, 118);
  const std::string header = bytes.substr(10, 118);
  EXPECT_EQ(header, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                        std::string(58, ' ') + "\n");
  EXPECT_EQ(std::memcmp(bytes.data() + 128, v, sizeof(v)), 0);
  // 1-D shapes carry numpy's trailing comma; 0-D is ().
  const std::int64_t ids[3] = {7, 8, 9};
  EXPECT_NE(encode_npy({"i", array_dtype::i64, {3}, ids}).find("'shape': (3,), }"),
            std::string::npos);
  const auto back = decode_npy(encode_npy({"i", array_dtype::i64, {3}, ids}), "ids.npy");
  EXPECT_EQ(back.dtype, array_dtype::i64);
  EXPECT_EQ(back.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(back.as_floats(), (std::vector<float>{7, 8, 9}));
}

TEST(ArrayFile, NpyReadsVersion2HeadersAndFloat64AndRefusesFortranOrder) {
  // Version 2.0: a 4-byte header length.
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  header.append(64 - (12 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes("\x93NUMPY\x02\x00", 8);
  put<std::uint32_t>(bytes, static_cast<std::uint32_t>(header.size()));
  bytes += header;
  put<double>(bytes, 0.25);
  put<double>(bytes, -3.5);
  const auto a = decode_npy(bytes, "v2.npy");
  EXPECT_EQ(a.as_floats(), (std::vector<float>{0.25f, -3.5f}));
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  try {
    decode_npy(fortran, "f.npy");
    FAIL() << "a Fortran-order array was read";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("f.npy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Fortran"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_npy(bytes.substr(0, bytes.size() - 1), "cut.npy"), data_error);
  EXPECT_THROW(decode_npy("not numpy at all", "x.npy"), data_error);
}

TEST(ArrayFile, NpzRoundTripAndEveryEntryIsCheckedByItsCrc) {
  const float w[4] = {0.5f, -1, 2, 3};
  const std::int32_t c[2] = {4, -5};
  const std::vector<array_ref> refs = {{"w", array_dtype::f32, {2, 2}, w},
                                       {"c", array_dtype::i32, {2}, c}};
  const std::string zip = encode_npz(refs);
  EXPECT_EQ(zip.substr(0, 4), std::string("PK\x03\x04", 4));
  const auto arrays = decode_npz(zip, "m.npz");
  ASSERT_EQ(arrays.size(), 2u);
  EXPECT_EQ(arrays[0].name, "w");
  EXPECT_EQ(arrays[0].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(arrays[0].as_floats(), (std::vector<float>{0.5f, -1, 2, 3}));
  EXPECT_EQ(arrays[1].name, "c");
  EXPECT_EQ(arrays[1].as_floats(), (std::vector<float>{4, -5}));
  // One data byte changed: the CRC-32 refuses it, naming the file and the entry.
  std::string damaged = zip;
  damaged[30 + 5 + 64] ^= 0x40;  // local header, "w.npy", the .npy header, first value
  try {
    decode_npz(damaged, "m.npz");
    FAIL() << "a damaged entry was read";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("m.npz (w.npy)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_npz(zip.substr(0, zip.size() / 2), "half.npz"), data_error);
}

// An npz as numpy.savez_compressed writes it: a deflated entry, and zip64 sizes in the central
// directory's extra field.
TEST(ArrayFile, NpzReadsDeflatedEntriesWithZip64Sizes) {
  const float v[3] = {1.5f, 2.5f, -0.5f};
  const std::string npy = encode_npy({"v", array_dtype::f32, {3}, v});
  std::string packed(compressBound(npy.size()) + 16, '\0');
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(npy.data()));
  z.avail_in = static_cast<uInt>(npy.size());
  z.next_out = reinterpret_cast<Bytef*>(packed.data());
  z.avail_out = static_cast<uInt>(packed.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  packed.resize(z.total_out);
  deflateEnd(&z);
  const std::uint32_t crc = crc32_update(0, npy.data(), npy.size());
  const std::string name = "v.npy";
  std::string zip;
  put<std::uint32_t>(zip, 0x04034b50);
  for (std::uint16_t x : {45, 0, 8, 0, 0})
    put<std::uint16_t>(zip, x);
  put<std::uint32_t>(zip, crc);
  put<std::uint32_t>(zip, 0xFFFFFFFF);
  put<std::uint32_t>(zip, 0xFFFFFFFF);
  put<std::uint16_t>(zip, static_cast<std::uint16_t>(name.size()));
  put<std::uint16_t>(zip, 20);
  zip += name;
  put<std::uint16_t>(zip, 1);
  put<std::uint16_t>(zip, 16);
  put<std::uint64_t>(zip, npy.size());
  put<std::uint64_t>(zip, packed.size());
  zip += packed;
  const auto central_at = static_cast<std::uint32_t>(zip.size());
  std::string central;
  put<std::uint32_t>(central, 0x02014b50);
  for (std::uint16_t x : {45, 45, 0, 8, 0, 0})
    put<std::uint16_t>(central, x);
  put<std::uint32_t>(central, crc);
  put<std::uint32_t>(central, 0xFFFFFFFF);
  put<std::uint32_t>(central, 0xFFFFFFFF);
  put<std::uint16_t>(central, static_cast<std::uint16_t>(name.size()));
  put<std::uint16_t>(central, 20);
  for (std::uint16_t x : {0, 0, 0})
    put<std::uint16_t>(central, x);
  put<std::uint32_t>(central, 0);
  put<std::uint32_t>(central, 0);
  central += name;
  put<std::uint16_t>(central, 1);
  put<std::uint16_t>(central, 16);
  put<std::uint64_t>(central, npy.size());
  put<std::uint64_t>(central, packed.size());
  zip += central;
  put<std::uint32_t>(zip, 0x06054b50);
  for (std::uint16_t x : {0, 0, 1, 1})
    put<std::uint16_t>(zip, x);
  put<std::uint32_t>(zip, static_cast<std::uint32_t>(central.size()));
  put<std::uint32_t>(zip, central_at);
  put<std::uint16_t>(zip, 0);
  const auto arrays = decode_npz(zip, "c.npz");
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays[0].name, "v");
  EXPECT_EQ(arrays[0].as_floats(), (std::vector<float>{1.5f, 2.5f, -0.5f}));
}

TEST(ArrayFile, SafetensorsHeaderDataAndMetadata) {
  const float a[2] = {1, 2};
  const std::int64_t b[3] = {3, 4, 5};
  const std::string bytes = encode_safetensors(
      {{{"a", array_dtype::f32, {1, 2}, a}, {"b", array_dtype::i64, {3}, b}}}, {{"model", "sage"}});
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(
      bytes.substr(8, n).find(
          R"({"__metadata__":{"model":"sage"},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[3],"data_offsets":[8,32]}})"),
      0u);
  EXPECT_EQ(bytes.size(), 8 + n + 8 + 24);
  std::map<std::string, std::string> meta;
  const auto arrays = decode_safetensors(bytes, "m.safetensors", &meta);
  ASSERT_EQ(arrays.size(), 2u);
  EXPECT_EQ(meta.at("model"), "sage");
  EXPECT_EQ(arrays[0].as_floats(), (std::vector<float>{1, 2}));
  EXPECT_EQ(arrays[1].as_floats(), (std::vector<float>{3, 4, 5}));
  // A header length past the file, offsets past the data, and a shape the offsets do not fit.
  std::string huge = bytes;
  const std::uint64_t big = 1ull << 40;
  std::memcpy(huge.data(), &big, 8);
  EXPECT_THROW(decode_safetensors(huge, "h.safetensors", nullptr), data_error);
  EXPECT_THROW(decode_safetensors(bytes.substr(0, bytes.size() - 4), "t.safetensors", nullptr),
               data_error);
  std::string reshaped = bytes;
  reshaped.replace(reshaped.find("[1,2]"), 5, "[2,2]");
  try {
    decode_safetensors(reshaped, "r.safetensors", nullptr);
    FAIL() << "a shape that its offsets do not fit was read";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("r.safetensors: a:"), std::string::npos) << e.what();
  }
}

// Crafted files that would make a small file decode to a large one, or a shape parse for long:
// refused before the copies.
TEST(ArrayFile, EntriesThatShareBytesAndOversizedShapesAreRefused) {
  const float v[4] = {1, 2, 3, 4};
  const std::string one = encode_npz(std::vector<array_ref>{{"v", array_dtype::f32, {4}, v}});
  // A second central record pointing at the same local entry (the end record then counts 2).
  const std::size_t central_at = one.find(std::string("PK\x01\x02", 4));
  const std::size_t end_at = one.find(std::string("PK\x05\x06", 4));
  ASSERT_NE(central_at, std::string::npos);
  std::string record = one.substr(central_at, end_at - central_at);
  std::string twice = one.substr(0, end_at) + record + one.substr(end_at);
  const std::uint16_t two = 2;
  std::memcpy(twice.data() + end_at + record.size() + 8, &two, 2);
  std::memcpy(twice.data() + end_at + record.size() + 10, &two, 2);
  const auto size = static_cast<std::uint32_t>(2 * record.size());
  std::memcpy(twice.data() + end_at + record.size() + 12, &size, 4);
  try {
    decode_npz(twice, "twice.npz");
    FAIL() << "two records of one entry were read";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("shares bytes with another entry"), std::string::npos)
        << e.what();
  }
  // safetensors: two tensors over the same bytes.
  std::string shared = encode_safetensors(
      std::vector<array_ref>{{"a", array_dtype::f32, {2}, v}, {"b", array_dtype::f32, {2}, v + 2}},
      {});
  shared.replace(shared.find("[8,16]"), 6, "[0, 8]");
  EXPECT_THROW(decode_safetensors(shared, "shared.safetensors", nullptr), data_error);
  std::string fractional =
      encode_safetensors(std::vector<array_ref>{{"a", array_dtype::f32, {4}, v}}, {});
  fractional.replace(fractional.find("[4]"), 3, "[4.0]");
  EXPECT_THROW(decode_safetensors(fractional, "f.safetensors", nullptr), data_error);
  // 65 dimensions: past NumPy's own limit.
  std::string dims = "(";
  for (int i = 0; i < 65; ++i)
    dims += "1, ";
  dims += ")";
  std::string npy = encode_npy({"x", array_dtype::f32, {1}, v});
  const std::size_t at = npy.find("(1,)");
  npy.replace(at, 4, dims);
  const auto header_len = static_cast<std::uint16_t>(npy.size() - 10 - sizeof(float));
  std::memcpy(npy.data() + 8, &header_len, 2);
  try {
    decode_npy(npy, "dims.npy");
    FAIL() << "a 65-dimension shape was read";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("over 64 dimensions"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace degnn

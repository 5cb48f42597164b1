#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/files.h"

namespace trident::io {

namespace {
int descr_bytes(const std::string& d) {
  if (d == "<i4" || d == "<u4") return 4;
  if (d == "<i8") return 8;
  return 0;
}
}  // namespace

void write_npy(const std::string& path, const std::string& descr, const std::vector<long>& shape,
               const std::vector<std::int64_t>& values) {
  int elem = descr_bytes(descr);
  if (!elem) throw std::invalid_argument("write_npy: unsupported dtype " + descr);
  std::string dims;
  for (long d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += (char)1;
  bytes += (char)0;
  std::uint16_t len = (std::uint16_t)header.size();
  bytes.append(reinterpret_cast<const char*>(&len), 2);
  bytes += header;
  bytes.reserve(bytes.size() + values.size() * elem);
  for (std::int64_t v : values) {
    if (elem == 8) {
      bytes.append(reinterpret_cast<const char*>(&v), 8);
    } else {
      std::int32_t w = (std::int32_t)v;
      bytes.append(reinterpret_cast<const char*>(&w), 4);
    }
  }
  write_file_atomically(path, bytes);
}

NpyArray read_npy(const std::string& path) {
  auto fail = [&](const std::string& why) { throw FormatError(path + ": " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open");
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() < 10 || raw.compare(0, 6, "\x93NUMPY") != 0) fail("not a .npy file");
  if (raw[6] != 1) fail("only .npy format version 1.0 is read");
  std::uint16_t len;
  std::memcpy(&len, raw.data() + 8, 2);
  if (10u + len > raw.size()) fail("truncated header");
  std::string header = raw.substr(10, len);
  std::smatch m;
  static const std::regex re(
      R"(\{'descr': '([<|>][iu][48])', 'fortran_order': (True|False), 'shape': \(([0-9, ]*)\), \})");
  if (!std::regex_search(header, m, re)) fail("unrecognised header " + header);
  NpyArray a;
  a.descr = m[1];
  if (m[2] == "True") fail("Fortran order is not supported");
  int elem = descr_bytes(a.descr);
  if (!elem) fail("unsupported dtype " + a.descr);
  std::stringstream dims(m[3].str());
  std::string item;
  long count = 1;
  while (std::getline(dims, item, ','))
    if (item.find_first_not_of(' ') != std::string::npos)
      a.shape.push_back(std::stol(item)), count *= a.shape.back();
  size_t data_bytes = raw.size() - 10 - len;
  if (data_bytes != (size_t)count * elem)
    fail("holds " + std::to_string(data_bytes) + " data bytes, the shape needs " +
         std::to_string(count * elem));
  a.values.resize(count);
  const char* p = raw.data() + 10 + len;
  for (long i = 0; i < count; ++i) {
    if (a.descr == "<i8") {
      std::memcpy(&a.values[i], p + 8 * i, 8);
    } else if (a.descr == "<i4") {
      std::int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      a.values[i] = v;
    } else {
      std::uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      a.values[i] = v;
    }
  }
  return a;
}

}  // namespace trident::io

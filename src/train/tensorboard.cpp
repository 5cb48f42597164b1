#include "train/tensorboard.h"

#include <nmmintrin.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace trident::train {

namespace {

// Protobuf wire format: a key is (field << 3 | wire type); 0 varint, 1 fixed64, 2 bytes,
// 5 fixed32.
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back((char)(v | 0x80));
    v >>= 7;
  }
  out.push_back((char)v);
}

template <class T>
void put_fixed(std::string& out, T v) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);  // x86 is little-endian, as the wire format
  out.append(bytes, sizeof v);
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_varint(out, (std::uint64_t)field << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// tensorflow/core/util/event.proto: Event { double wall_time = 1; int64 step = 2;
// oneof what { string file_version = 3; Summary summary = 5; } }
// tensorflow/core/framework/summary.proto: Summary { repeated Value value = 1; }
// Value { string tag = 1; float simple_value = 2; }
std::string event(long step, const std::string& what, int what_field) {
  std::string e;
  put_varint(e, 1 << 3 | 1);
  put_fixed(
      e,
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  put_varint(e, 2 << 3 | 0);
  put_varint(e, (std::uint64_t)step);
  put_bytes(e, what_field, what);
  return e;
}

std::string scalar_summary(const std::string& tag, float value) {
  std::string v;
  put_bytes(v, 1, tag);
  put_varint(v, 2 << 3 | 5);
  put_fixed(v, value);
  std::string summary;
  put_bytes(summary, 1, v);
  return summary;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

// SSE4.2's crc32 instruction computes CRC-32C (Debian 12 packages no C/C++ CRC-32C
// library); the attribute lets builds without -march=native (sanitizers, fuzzing) compile it.
__attribute__((target("sse4.2"))) std::uint32_t crc32c(std::string_view data) {
  std::uint64_t crc = 0xffffffffu;
  size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, data.data() + i, sizeof word);
    crc = _mm_crc32_u64(crc, word);
  }
  for (; i < data.size(); ++i) crc = _mm_crc32_u8((std::uint32_t)crc, (std::uint8_t)data[i]);
  return (std::uint32_t)crc ^ 0xffffffffu;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("--tensorboard-dir: cannot create " + dir + ": " + ec.message());
  const long now = (long)std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // TensorBoard's naming; the pid keeps two starts within one second apart.
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(now) + "." +
                                         host_name() + "." + std::to_string(getpid())))
              .string();
  out_.open(path_, std::ios::binary);
  if (!out_) throw std::runtime_error("--tensorboard-dir: cannot write " + path_);
  write_record(event(0, "brain.Event:2", 3));
  out_.flush();
}

void TensorBoardWriter::scalar(const std::string& tag, double value, long step) {
  if (!out_.is_open()) return;
  write_record(event(step, scalar_summary(tag, (float)value), 5));
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string length;
  put_fixed(length, (std::uint64_t)data.size());
  std::string header = length;
  put_fixed(header, masked_crc32c(length));
  out_.write(header.data(), (std::streamsize)header.size());
  out_.write(data.data(), (std::streamsize)data.size());
  std::string footer;
  put_fixed(footer, masked_crc32c(data));
  out_.write(footer.data(), (std::streamsize)footer.size());
}

}  // namespace trident::train

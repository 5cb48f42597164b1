#pragma once
// TensorBoard event files, written without TensorFlow: each record is TFRecord-framed
// (length, masked CRC-32C of the length, an `Event` protobuf, masked CRC-32C of it) and each
// Event carries a wall time, a step and one `Summary` of scalar values. The protobuf fields
// are encoded here (a handful of tags; Debian's protobuf would need the .proto compiled in).
// A resumed run writes a new file into the same directory, which TensorBoard reads as one
// run (Megatron's SummaryWriter does the same).
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace trident::train {

// CRC-32C (Castagnoli) of data, and TFRecord's masked form of it.
std::uint32_t crc32c(std::string_view data);
std::uint32_t masked_crc32c(std::string_view data);

class TensorBoardWriter {
 public:
  // Empty dir: writes nothing. Creates the directory and a new events file in it.
  explicit TensorBoardWriter(const std::string& dir);
  bool enabled() const { return out_.is_open(); }
  const std::string& path() const { return path_; }
  void scalar(const std::string& tag, double value, long step);
  void flush() {
    if (out_.is_open()) out_.flush();
  }

 private:
  void write_record(const std::string& event);
  std::ofstream out_;
  std::string path_;
};

}  // namespace trident::train

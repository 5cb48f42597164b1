// The safetensors reader against files written byte by byte here (not by trident's
// writer), and every kind of lie a header can tell.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/hf_gpt2.h"
#include "io/safetensors.h"

namespace trident::io {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / "trident_tests";
  fs::create_directories(dir);
  return (dir / name).string();
}

// A file from an explicit header string and data bytes.
std::string make_file(const std::string& name, const std::string& header, const std::string& data,
                      long claimed_len = -1) {
  std::string path = temp_path(name);
  std::ofstream out(path, std::ios::binary);
  unsigned long long len = claimed_len >= 0 ? (unsigned long long)claimed_len : header.size();
  for (int i = 0; i < 8; ++i) out.put((char)((len >> (8 * i)) & 0xff));
  out << header << data;
  return path;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

std::string expect_error(const std::string& path) {
  try {
    SafetensorsFile f(path);
  } catch (const FormatError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << path;
  return "";
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  std::string header =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})";
  SafetensorsFile f(make_file("good.safetensors", header, floats({1, 2, 3, 4})));
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.read_float(*f.find("a")), (std::vector<float>{1, 2}));
  EXPECT_EQ(f.read_float(*f.find("b")), (std::vector<float>{3, 4}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(Safetensors, ConvertsHalfAndBfloat16) {
  std::string data("\x00\x3c\x00\xc0\x80\x3f\x00\x40", 8);  // f16 1, -2; bf16 1, 2
  std::string header =
      R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}})";
  SafetensorsFile f(make_file("half.safetensors", header, data));
  EXPECT_EQ(f.read_float(*f.find("h")), (std::vector<float>{1, -2}));
  EXPECT_EQ(f.read_float(*f.find("b")), (std::vector<float>{1, 2}));
}

// A slice of a stacked tensor (transformers v5's fused experts are read expert by expert).
TEST(Safetensors, CopiesARangeOfElementsAndRefusesOneOutside) {
  std::string data = floats({1, 2, 3, 4});
  data += std::string("\x80\x3f\x00\x40\x40\x40", 6);  // bf16 1, 2, 3
  std::string header =
      R"({"f":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
  SafetensorsFile f(make_file("range.safetensors", header, data));
  float out[2] = {0, 0};
  f.copy_float_range(*f.find("f"), 2, 2, out);
  EXPECT_EQ(out[0], 3.f);
  EXPECT_EQ(out[1], 4.f);
  f.copy_float_range(*f.find("b"), 1, 2, out);
  EXPECT_EQ(out[0], 2.f);
  EXPECT_EQ(out[1], 3.f);
  EXPECT_THROW(f.copy_float_range(*f.find("f"), 3, 2, out), std::out_of_range);
  EXPECT_THROW(f.copy_float_range(*f.find("b"), -1, 1, out), std::out_of_range);
}

struct BadCase {
  const char* name;
  std::string header;
  std::string data;
  long claimed_len;
  const char* message;  // must appear in the error
};

TEST(Safetensors, RejectsEveryInconsistentHeader) {
  const std::string two = floats({1, 2});
  std::vector<BadCase> cases = {
      {"short", "", "", -2, "shorter than the 8-byte header"},
      {"lying_length", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two, 5000,
       "runs past the end"},
      {"not_json", "{not json", two, -1, "not valid JSON"},
      {"not_object", "[1,2]", two, -1, "must be a JSON object"},
      {"no_dtype", R"({"a":{"shape":[2],"data_offsets":[0,8]}})", two, -1, "missing dtype"},
      {"bad_dtype", R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", two, -1,
       "unknown dtype"},
      {"neg_shape", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", two, -1,
       "non-negative"},
      {"size_mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", two, -1,
       "need 12 bytes"},
      {"past_end", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", two, -1,
       "past the data section"},
      {"reversed", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", two, -1,
       "end < begin"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       two, -1, "without gaps or overlap"},
      {"gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two, -1,
       "without gaps or overlap"},
      {"trailing", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", two, -1,
       "cover 4 of 8"},
      // Found while writing fuzz/fuzz_safetensors.cpp (which reproduces it): the element
      // count overflowed a long (undefined), and a shape of 2^62 + 1 rows of 4 floats
      // wrapped around to 4 elements and passed as 16 bytes.
      {"overflow", R"({"a":{"dtype":"F32","shape":[4611686018427387905,4],"data_offsets":[0,8]}})",
       two, -1, "has more than 2^62 elements"},
      {"overflow_wraps",
       R"({"a":{"dtype":"F32","shape":[4611686018427387904,1],"data_offsets":[0,8]}})", two, -1,
       "need more than 2^64 bytes but data_offsets span 8"},
      {"metadata",
       R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two, -1,
       "must be a string"},
  };
  for (const BadCase& c : cases) {
    std::string path;
    if (c.claimed_len == -2) {
      path = temp_path(std::string(c.name) + ".safetensors");
      std::ofstream(path, std::ios::binary) << "abc";
    } else {
      path = make_file(std::string(c.name) + ".safetensors", c.header, c.data, c.claimed_len);
    }
    std::string error = expect_error(path);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(path), std::string::npos) << "error must name the file: " << error;
  }
}

TEST(Safetensors, WriterOutputIsReadableAndAtomic) {
  std::string path = temp_path("written.safetensors");
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7};
  write_safetensors(path, {{"a", {2, 3}, a.data()}, {"b", {1}, b.data()}}, {{"k", "v"}});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  SafetensorsFile f(path);
  EXPECT_EQ(f.find("a")->shape, (std::vector<long>{2, 3}));
  EXPECT_EQ(f.read_float(*f.find("a")), a);
  EXPECT_EQ(f.read_float(*f.find("b")), b);
  // The data section starts 8-byte aligned.
  std::ifstream in(path, std::ios::binary);
  unsigned long long len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ(len % 8, 0u);
}

// The layout other writers place pieces by is the one the writer produced and the reader
// finds: the same header bytes, each tensor at the offset the header gives it, the same size.
TEST(Safetensors, LayoutIsWhereTheWriterPutsEachTensor) {
  std::string path = temp_path("layout.safetensors");
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7}, c = {8, 9, 10};
  const std::vector<TensorToWrite> tensors = {
      {"a", {2, 3}, a.data()}, {"b", {1}, b.data()}, {"c", {3}, c.data()}};
  const size_t written = write_safetensors(path, tensors, {{"format", "pt"}});
  const SafetensorsLayout layout = safetensors_layout(tensors, {{"format", "pt"}});
  EXPECT_EQ(layout.file_bytes, written);
  EXPECT_EQ(fs::file_size(path), written);
  std::ifstream in(path, std::ios::binary);
  std::string head(layout.header.size(), '\0');
  in.read(head.data(), (std::streamsize)head.size());
  EXPECT_EQ(head, layout.header);
  SafetensorsFile f(path);
  ASSERT_EQ(layout.offsets.size(), 3u);
  for (size_t i = 0; i < tensors.size(); ++i)
    EXPECT_EQ(layout.offsets[i], layout.header.size() + f.find(tensors[i].name)->begin);
}

// BF16 tensors are the upper halves of the floats, rounded to nearest even: 1 + 2^-8 lies
// halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81) and goes down; 1 + 3 x 2^-8 lies
// halfway between 0x3F81 and 0x3F82 (even) and goes up; -2 is 0xC000 exactly. Little-endian
// in the file, as the format stores every dtype; read back as the values the bits hold.
TEST(Safetensors, WritesBfloat16RoundedToNearestEven) {
  std::string path = temp_path("bf16.safetensors");
  const std::vector<float> a = {1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, -2.f}, b = {0.5f};
  write_safetensors(path, {{"a", {3}, a.data(), StoredDtype::kBF16}, {"b", {1}, b.data()}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.find("a")->dtype, "BF16");
  EXPECT_EQ(f.find("b")->dtype, "F32");
  EXPECT_EQ(f.find("a")->end - f.find("a")->begin, 6u);
  EXPECT_EQ(f.read_float(*f.find("a")), (std::vector<float>{1.f, 1.f + 0x1p-6f, -2.f}));
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unsigned long long len = 0;
  std::memcpy(&len, bytes.data(), 8);
  const unsigned char* data =
      reinterpret_cast<const unsigned char*>(bytes.data()) + 8 + len + f.find("a")->begin;
  EXPECT_EQ(std::vector<int>(data, data + 6),
            (std::vector<int>{0x80, 0x3F, 0x82, 0x3F, 0x00, 0xC0}));
}

TEST(HfConfig, RejectsBadConfigs) {
  fs::path dir = temp_path("bad_hf");
  fs::create_directories(dir);
  auto write = [&](const std::string& text) { std::ofstream(dir / "config.json") << text; };
  auto error = [&]() -> std::string {
    try {
      read_hf_config(dir.string());
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  };
  write("{\"n_layer\": 2");
  EXPECT_NE(error().find("not valid JSON"), std::string::npos);
  write(R"({"n_layer": 2, "n_embd": 10, "n_head": 3, "vocab_size": 50, "n_positions": 8})");
  EXPECT_NE(error().find("divisible by n_head"), std::string::npos);
  write(R"({"n_layer": 2, "n_embd": 12, "n_head": 3, "vocab_size": 50})");
  EXPECT_NE(error().find("missing key \"n_positions\""), std::string::npos);
  write(R"({"n_layer": -1, "n_embd": 12, "n_head": 3, "vocab_size": 50, "n_positions": 8})");
  EXPECT_NE(error().find("\"n_layer\" must be a positive integer"), std::string::npos);
  write(
      R"({"n_layer": 1, "n_embd": 12, "n_head": 3, "vocab_size": 50, "n_positions": 8, "activation_function": "relu"})");
  EXPECT_NE(error().find("activation_function"), std::string::npos);
  // Caught by the check in fuzz/fuzz_hf_config.cpp: an epsilon a float cannot hold became 0
  // (1e-50) or inf (1e300) in the model.
  for (const char* epsilon : {"1e-50", "1e300", "0", "-1e-5", "\"1e-5\""}) {
    write(std::string(R"({"n_layer": 1, "n_embd": 12, "n_head": 3, "vocab_size": 50, )") +
          R"("n_positions": 8, "layer_norm_epsilon": )" + epsilon + "}");
    EXPECT_NE(error().find("\"layer_norm_epsilon\" must be a positive number within float's range"),
              std::string::npos)
        << epsilon;
  }
  write(R"({"n_layer": 1, "n_embd": 12, "n_head": 3, "vocab_size": 50, "n_positions": 8, )"
        R"("layer_norm_epsilon": 1e-40})");  // a float subnormal: small, but positive
  EXPECT_GT(read_hf_config(dir.string()).layernorm_epsilon, 0.f);
  // Every problem at once, each on a line naming the file.
  write(R"({"n_layer": -1, "n_embd": 12, "n_head": 3, "vocab_size": 50, "model_type": "bert"})");
  const std::string all = error(), file = (dir / "config.json").string();
  for (const char* problem : {"\"n_layer\" must be a positive integer",
                              "missing key \"n_positions\"", "\"model_type\" is \"bert\""})
    EXPECT_NE(all.find(file + ": " + problem), std::string::npos) << all;
}

}  // namespace
}  // namespace trident::io

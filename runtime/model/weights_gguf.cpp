// WeightSource over a GGUF file (see weights_source.h). A range that starts or ends inside a
// quantization block is served by dequantizing the whole blocks around it into a scratch buffer.
#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/model/gguf_dequant.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/weights_source.h"

namespace conveyor {
namespace {

class GgufSource : public WeightSource {
 public:
  explicit GgufSource(const std::string& path) : file_(path) {
    for (const auto& t : file_.tensors())
      tensors_.push_back({t.name, t.shape(), ggml_type_name(t.type), t.nbytes, path});
    std::sort(tensors_.begin(), tensors_.end(), [](const SourceTensor& a, const SourceTensor& b) { return a.name < b.name; });
  }

  SourceFormat format() const override { return SourceFormat::kGguf; }
  const std::string& path() const override { return file_.path(); }
  const std::vector<SourceTensor>& tensors() const override { return tensors_; }
  const GgufFile& gguf() const { return file_; }

  void check_readable(const std::string& name) const override { readable(name); }

  void read_range(const std::string& name, int64_t begin, int64_t end, float* out) const override {
    const GgufTensorInfo* t = &readable(name);
    CONVEYOR_CHECK(begin >= 0 && begin <= end && end <= t->numel(), "read of elements [", begin, ", ", end,
                   ") of tensor '", name, "' in '", path(), "' is outside its ", t->numel(), " elements");
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t->type));
    int64_t be = tr->block_elems;
    int64_t first_block = begin / be, last_block = (end + be - 1) / be;
    const uint8_t* src = file_.tensor_data(*t) + first_block * tr->block_bytes;
    if (begin % be == 0 && end % be == 0) {
      gguf_dequantize(t->type, src, end - begin, out);
      return;
    }
    std::vector<float> scratch(static_cast<size_t>((last_block - first_block) * be));
    gguf_dequantize(t->type, src, static_cast<int64_t>(scratch.size()), scratch.data());
    std::copy_n(scratch.begin() + (begin - first_block * be), end - begin, out);
  }

 private:
  const GgufTensorInfo& readable(const std::string& name) const {
    const GgufTensorInfo* t = file_.find_tensor(name);
    CONVEYOR_CHECK(t != nullptr, "no tensor '", name, "' in GGUF file '", path(), "'");
    CONVEYOR_CHECK(gguf_can_dequantize(t->type), "GGUF file '", path(), "': tensor '", name, "' has type ",
                   ggml_type_name(t->type), ", which conveyor cannot dequantize (F32, F16, BF16, Q8_0, Q4_0, Q4_1, ",
                   "Q4_K, Q6_K); requantize the model to one of these");
    return *t;
  }

  GgufFile file_;
  std::vector<SourceTensor> tensors_;
};

}  // namespace

std::unique_ptr<WeightSource> open_gguf_source(const std::string& path) { return std::make_unique<GgufSource>(path); }

}  // namespace conveyor

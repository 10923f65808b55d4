// Every distillation loss on the executor: the same loss, per-row losses and gradient bytes on every executor and
// thread count (serial, pools of 1, 2, 3 and 8), and a bad row reported as in a serial loop (the first one).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "shrink/distill/attention_transfer.hpp"
#include "shrink/distill/cosine_embedding.hpp"
#include "shrink/distill/cross_entropy.hpp"
#include "shrink/distill/feature_mse.hpp"
#include "shrink/distill/soft_target.hpp"
#include "shrink/distill/topk_teacher.hpp"
#include "support/executors.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::distill;
using shrink::test::require_same_bytes_on_every_executor;

namespace {

constexpr std::int64_t kRows = 96, kVocab = 4096;

// The loss value, the per-row losses, then the gradient, as doubles (the gradient widened exactly).
std::vector<double> result(const Loss& loss, const std::vector<float>& grad) {
  std::vector<double> out{loss.value};
  out.insert(out.end(), loss.per_row.begin(), loss.per_row.end());
  out.insert(out.end(), grad.begin(), grad.end());
  return out;
}

}  // namespace

TEST_CASE("logit losses give the same bytes on every executor", "[distill][threads]") {
  const auto s = shrink::test::random_values(static_cast<std::size_t>(kRows * kVocab), 41, 3.0f);
  const auto t = shrink::test::random_values(static_cast<std::size_t>(kRows * kVocab), 42, 3.0f);
  const Shape shape{kRows, kVocab};
  const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
  for (bool validate_first : {true, false}) {
    for (Reduction reduction : {Reduction::batchmean, Reduction::none}) {
      SoftTargetOptions o;
      o.temperature = 2.0f;
      o.reduction = reduction;
      o.validate_first = validate_first;
      auto with_grad = [&](auto loss_fn) {
        return [&, loss_fn] {
          std::vector<float> g(s.size());
          const Loss loss = loss_fn(TensorView<float>(g.data(), shape));
          return result(loss, g);
        };
      };
      require_same_bytes_on_every_executor(
          with_grad([&](TensorView<float> g) { return kl_div_with_grad(student, teacher, g, o); }));
      require_same_bytes_on_every_executor(
          with_grad([&](TensorView<float> g) { return reverse_kl_div_with_grad(student, teacher, g, o); }));
      require_same_bytes_on_every_executor(
          with_grad([&](TensorView<float> g) { return jensen_shannon_with_grad(student, teacher, 0.3, g, o); }));
    }
  }
  std::vector<std::int64_t> labels(static_cast<std::size_t>(kRows));
  for (std::int64_t r = 0; r < kRows; ++r) labels[static_cast<std::size_t>(r)] = (r * 7919) % kVocab;
  const TensorView<const std::int64_t> label_view(labels.data(), Shape{kRows});
  require_same_bytes_on_every_executor([&] {
    std::vector<float> g(s.size());
    CrossEntropyOptions o;
    o.label_smoothing = 0.1;
    const Loss loss = cross_entropy_with_grad(student, label_view, TensorView<float>(g.data(), shape), o);
    return result(loss, g);
  });
  // A top-k teacher: the first k logits of each row with their indices.
  constexpr std::int64_t k = 64;
  std::vector<float> top(static_cast<std::size_t>(kRows * k));
  std::vector<std::int32_t> index(static_cast<std::size_t>(kRows * k));
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      index[static_cast<std::size_t>(r * k + c)] = static_cast<std::int32_t>(c * 3 + r % 3);
      top[static_cast<std::size_t>(r * k + c)] = t[static_cast<std::size_t>(r * kVocab + c * 3 + r % 3)];
    }
  const TopKTeacher<float, std::int32_t> topk{TensorView<const float>(top.data(), Shape{kRows, k}),
                                              TensorView<const std::int32_t>(index.data(), Shape{kRows, k})};
  require_same_bytes_on_every_executor([&] {
    std::vector<float> g(s.size());
    const Loss loss = kl_div_with_grad(student, topk, TensorView<float>(g.data(), shape));
    return result(loss, g);
  });
}

TEST_CASE("feature losses give the same bytes on every executor", "[distill][threads]") {
  constexpr std::int64_t rows = 512, d = 1024;
  const auto s = shrink::test::random_values(static_cast<std::size_t>(rows * d), 43);
  const auto t = shrink::test::random_values(static_cast<std::size_t>(rows * d), 44);
  const Shape shape{rows, d};
  const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
  auto both_grads = [&](auto loss_fn) {
    return [&, loss_fn] {
      std::vector<float> gs(s.size()), gt(t.size());
      const Loss loss = loss_fn(TensorView<float>(gs.data(), shape), TensorView<float>(gt.data(), shape));
      std::vector<double> out = result(loss, gs);
      out.insert(out.end(), gt.begin(), gt.end());
      return out;
    };
  };
  require_same_bytes_on_every_executor(both_grads(
      [&](TensorView<float> gs, TensorView<float> gt) { return mse_loss_with_grad<float>(student, teacher, gs, gt); }));
  require_same_bytes_on_every_executor(both_grads([&](TensorView<float> gs, TensorView<float> gt) {
    return cosine_embedding_loss_with_grad<float>(student, teacher, {}, gs, gt);
  }));
  // Attention transfer over [B, C, H, W] = [32, 16, 32, 32] (the same data seen as feature maps).
  const Shape maps{32, 16, 32, 32};
  const TensorView<const float> sm(s.data(), maps), tm(t.data(), maps);
  require_same_bytes_on_every_executor([&] {
    std::vector<float> gs(s.size()), gt(t.size());
    const Loss loss = attention_transfer_loss_with_grad<float>(sm, tm, TensorView<float>(gs.data(), maps),
                                                               TensorView<float>(gt.data(), maps));
    std::vector<double> out = result(loss, gs);
    out.insert(out.end(), gt.begin(), gt.end());
    return out;
  });
}

TEST_CASE("a bad row is reported as the first one in row order on every executor", "[distill][threads]") {
  auto s = shrink::test::random_values(static_cast<std::size_t>(kRows * kVocab), 45);
  const auto t = shrink::test::random_values(static_cast<std::size_t>(kRows * kVocab), 46);
  s[static_cast<std::size_t>(70 * kVocab + 5)] = std::numeric_limits<float>::quiet_NaN();
  s[static_cast<std::size_t>(30 * kVocab + 9)] = std::numeric_limits<float>::quiet_NaN();
  const Shape shape{kRows, kVocab};
  for (const auto& e : shrink::test::test_executors()) {
    INFO(e.name);
    ScopedExecutor scope(*e.executor);
    for (bool validate_first : {true, false}) {
      SoftTargetOptions o;
      o.validate_first = validate_first;
      std::vector<float> g(s.size());
      REQUIRE_THROWS_WITH(
          kl_div_with_grad(TensorView<const float>(s.data(), shape), TensorView<const float>(t.data(), shape),
                           TensorView<float>(g.data(), shape), o),
          Catch::Contains("row 30"));
    }
  }
}

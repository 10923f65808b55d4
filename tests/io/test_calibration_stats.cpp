// io/calibration_stats.hpp: statistics round-trip (with an alias and F32 tensors), a HessianObserver's Hessian read
// back bit for bit, and every hostile file or bad argument one Error naming the tensor or key, nothing written on
// failure.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "io/temp_dir.hpp"
#include "shrink/io/calibration_stats.hpp"
#include "shrink/io/safetensors.hpp"
#include "shrink/quant/hessian.hpp"

using namespace shrink;
using namespace shrink::io;

namespace {

std::map<std::string, LinearInputStats> two_linears() {
  LinearInputStats q;
  q.samples = 40;
  q.hessian = {2.0, 0.5, 0.25, 0.5, 3.0, -1.0, 0.25, -1.0, 4.0};
  q.act_norm = {1.0, 2.0, 3.0};
  LinearInputStats down;
  down.samples = 40;
  down.act_abs_mean = {0.5, 0.0, 1.5, 2.0};
  return {{"layers.0.q_proj", q}, {"layers.0.down_proj", down}};
}

// A file of any tensors, given as doubles and written as dtype, and any metadata (for hostile cases).
void write_doubles_as(const std::string& path, const std::map<std::string, std::vector<double>>& f64,
                      const std::map<std::string, std::vector<std::int64_t>>& shapes,
                      const std::map<std::string, std::string>& metadata, ScalarType dtype = ScalarType::f64) {
  std::vector<TensorDeclaration> decl;
  for (const auto& [name, v] : f64) decl.push_back({name, dtype, shapes.at(name)});
  SafetensorsWriter w(path, decl, metadata);
  for (const auto& [name, v] : f64) {
    if (dtype == ScalarType::f64) {
      w.write(name, v.data(), v.size() * sizeof(double));
    } else {
      std::vector<float> f(v.begin(), v.end());
      std::vector<std::int32_t> i(v.begin(), v.end());
      if (dtype == ScalarType::f32)
        w.write(name, f.data(), f.size() * sizeof(float));
      else
        w.write(name, i.data(), i.size() * sizeof(std::int32_t));
    }
  }
  w.finish();
}

}  // namespace

TEST_CASE("calibration statistics round-trip, with an alias", "[io][calibration]") {
  test::TempDir dir;
  const std::string path = dir.file("stats.safetensors");
  save_calibration_stats(path, two_linears(), {{"layers.0.k_proj", "layers.0.q_proj"}});
  const CalibrationStatsFile f(path);
  CHECK(f.linears() == std::vector<std::string>{"layers.0.down_proj", "layers.0.k_proj", "layers.0.q_proj"});
  CHECK(f.samples("layers.0.k_proj") == 40);
  CHECK(f.features("layers.0.q_proj") == 3);
  CHECK(f.features("layers.0.down_proj") == 4);
  CHECK(f.source("layers.0.k_proj") == "layers.0.q_proj");
  CHECK(f.source("layers.0.q_proj") == "layers.0.q_proj");
  CHECK_THROWS_WITH(f.source("layers.0.v_proj"), Catch::Contains("no statistics for \"layers.0.v_proj\""));
  CHECK(f.has_hessian("layers.0.k_proj"));
  CHECK_FALSE(f.has_hessian("layers.0.down_proj"));
  CHECK_FALSE(f.has_act_abs_mean("layers.0.q_proj"));
  CHECK_FALSE(f.has_hessian("layers.0.v_proj"));
  const quant::Hessian h = f.hessian("layers.0.k_proj");
  CHECK(h.features == 3);
  CHECK(h.samples == 40);
  CHECK(h.values == two_linears().at("layers.0.q_proj").hessian);
  CHECK(f.act_norm("layers.0.q_proj") == std::vector<double>{1.0, 2.0, 3.0});
  CHECK(f.act_abs_mean("layers.0.down_proj") == std::vector<double>{0.5, 0.0, 1.5, 2.0});
  CHECK_THROWS_WITH(f.hessian("layers.0.down_proj"), Catch::Contains("no hessian for \"layers.0.down_proj\""));
  CHECK_THROWS_WITH(f.samples("layers.1.q_proj"), Catch::Contains("no statistics for \"layers.1.q_proj\""));
}

TEST_CASE("a HessianObserver's Hessian is read back bit for bit; F32 statistics are widened", "[io][calibration]") {
  test::TempDir dir;
  std::vector<float> x(50 * 7);
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = std::sin(0.37f * static_cast<float>(k)) * 3.0f;
  quant::HessianObserver o;
  o.observe(TensorView<const float>(x.data(), Shape{50, 7}));
  const quant::Hessian h = o.hessian();
  LinearInputStats s;
  s.samples = h.samples;
  s.hessian = h.values;
  save_calibration_stats(dir.file("h.safetensors"), {{"fc", s}});
  const quant::Hessian back = CalibrationStatsFile(dir.file("h.safetensors")).hessian("fc");
  CHECK(back.values == h.values);
  CHECK(back.samples == 50);

  write_doubles_as(dir.file("f32.safetensors"), {{"fc.act_norm", {1.5, 2.25}}}, {{"fc.act_norm", {2}}},
                   {{"shrink.calibration", "1"}, {"fc.samples", "9"}}, ScalarType::f32);
  CHECK(CalibrationStatsFile(dir.file("f32.safetensors")).act_norm("fc") == std::vector<double>{1.5, 2.25});
}

TEST_CASE("hostile calibration files: one Error each, naming the tensor or key", "[io][calibration][errors]") {
  test::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::map<std::string, std::string> ok_meta{{"shrink.calibration", "1"}, {"fc.samples", "10"}};
  auto opens_with = [&](const std::map<std::string, std::vector<double>>& t,
                        const std::map<std::string, std::vector<std::int64_t>>& shapes,
                        const std::map<std::string, std::string>& meta, const char* needle,
                        ScalarType dtype = ScalarType::f64) {
    write_doubles_as(path, t, shapes, meta, dtype);
    CHECK_THROWS_WITH(CalibrationStatsFile(path), Catch::Contains(needle));
  };
  const std::vector<double> h2 = {1.0, 0.5, 0.5, 2.0};
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {2, 2}}}, {{"fc.samples", "10"}},
             "\"shrink.calibration\" = (absent)");
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {2, 2}}}, {{"shrink.calibration", "2"}, {"fc.samples", "10"}},
             "\"shrink.calibration\" = \"2\"");
  opens_with({{"fc.weight", h2}}, {{"fc.weight", {2, 2}}}, ok_meta, "tensor \"fc.weight\": expected a name");
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {4}}}, ok_meta, "has shape [4]: expected [in, in]");
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {1, 4}}}, ok_meta, "has shape [1, 4]");
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {2, 2}}}, ok_meta, "has dtype I32", ScalarType::i32);
  opens_with({{"fc.hessian", h2}, {"fc.act_norm", {1, 2, 3}}}, {{"fc.hessian", {2, 2}}, {"fc.act_norm", {3}}}, ok_meta,
             "features: expected");
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {2, 2}}}, {{"shrink.calibration", "1"}},
             "\"fc.samples\" = (absent)");
  for (const char* count : {"", "0", "-5", "1e3", "12a", "9999999999999999999"})
    opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {2, 2}}}, {{"shrink.calibration", "1"}, {"fc.samples", count}},
               "\"fc.samples\" = \"");
  auto meta = ok_meta;
  meta["k.same_input_as"] = "q";
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {2, 2}}}, meta, "\"k.same_input_as\" = \"q\"");
  meta = ok_meta;
  meta["fc.same_input_as"] = "fc";
  opens_with({{"fc.hessian", h2}}, {{"fc.hessian", {2, 2}}}, meta, "has statistics of its own");

  // Values are checked when read.
  auto reads_with = [&](const std::string& name, std::vector<double> v, std::vector<std::int64_t> shape,
                        const char* needle) {
    write_doubles_as(path, {{name, v}}, {{name, shape}}, ok_meta);
    const CalibrationStatsFile f(path);
    if (name == "fc.hessian") CHECK_THROWS_WITH(f.hessian("fc"), Catch::Contains(needle));
    if (name == "fc.act_norm") CHECK_THROWS_WITH(f.act_norm("fc"), Catch::Contains(needle));
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  reads_with("fc.hessian", {1.0, nan, nan, 2.0}, {2, 2}, "fc.hessian[1] = nan");
  reads_with("fc.hessian", {1.0, 0.5, 0.6, 2.0}, {2, 2}, "expected a symmetric matrix");
  reads_with("fc.hessian", {1.0, 0.5, 0.5, -2.0}, {2, 2}, "fc.hessian[1, 1] = -2");
  reads_with("fc.act_norm", {1.0, -0.5}, {2}, "fc.act_norm[1] = -0.5");
  reads_with("fc.act_norm", {std::numeric_limits<double>::infinity(), 1.0}, {2}, "fc.act_norm[0] = inf");
}

TEST_CASE("save_calibration_stats checks everything before it writes", "[io][calibration][errors]") {
  test::TempDir dir;
  const std::string path = dir.file("out.safetensors");
  auto refuses = [&](std::map<std::string, LinearInputStats> linears, std::map<std::string, std::string> aliases,
                     const char* needle) {
    CHECK_THROWS_WITH(save_calibration_stats(path, linears, aliases), Catch::Contains(needle));
    CHECK(dir.entries() == 0);  // nothing written
  };
  auto good = two_linears();
  auto bad = good;
  bad["layers.0.q_proj"].act_norm = {1.0, 2.0};
  refuses(bad, {}, "linears[\"layers.0.q_proj\"].act_norm.size() = 2");
  bad = good;
  bad["layers.0.q_proj"].hessian.pop_back();
  refuses(bad, {}, "hessian.size() = 8");
  bad = good;
  bad["layers.0.q_proj"].samples = 0;
  refuses(bad, {}, "linears[\"layers.0.q_proj\"].samples = 0");
  bad = good;
  bad["layers.0.q_proj"].act_norm[1] = std::numeric_limits<double>::infinity();
  refuses(bad, {}, "finite statistics");
  bad = good;
  bad["empty"] = LinearInputStats{};
  refuses(bad, {}, "linears[\"empty\"] = no statistic");
  refuses(good, {{"layers.0.v_proj", "layers.0.nothing"}}, "same_input_as[\"layers.0.v_proj\"] = layers.0.nothing");
  refuses(good, {{"layers.0.q_proj", "layers.0.down_proj"}}, "no alias for a Linear that has statistics");
}

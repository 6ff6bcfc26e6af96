// Importer units: initializer storage forms and limits, on ModelProtos built here.
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/helm/HelmDialect.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

namespace {
onnx::ModelProto matmulModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto *g = m.mutable_graph();
  auto *in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto *node = g->add_node();
  node->set_op_type("MatMul");
  node->set_name("mm");
  node->add_input("x");
  node->add_input("w");
  node->add_output("y");
  g->add_output()->set_name("y");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

/// The imported model, or one with a null module and `error` set.
helm::ImportedModel import(const onnx::ModelProto &m, mlir::MLIRContext &ctx, std::string &error,
                           const helm::ImportOptions &options = {},
                           const std::string &baseDir = ".", const std::string &name = "test.onnx") {
  std::string bytes = m.SerializeAsString();
  auto model = helm::importOnnxBytes(ctx, bytes.data(), bytes.size(), name, baseDir, options);
  if (!model) {
    error = llvm::toString(model.takeError());
    return {};
  }
  return std::move(*model);
}
} // namespace

TEST(Importer, Fp16TypedFieldsBecomeAWeight) {
  auto m = matmulModel();
  auto *w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT16);
  w->add_dims(16);
  w->add_dims(8);
  for (int i = 0; i < 128; ++i)
    w->add_int32_data(0x3c00); // 1.0 in fp16
  mlir::MLIRContext ctx;
  std::string error;
  auto model = import(m, ctx, error);
  ASSERT_TRUE(model.module) << error;
  int decls = 0;
  model.module->walk([&](helm::WeightDeclOp d) {
    ++decls;
    EXPECT_EQ(d.getLengthAttr().getInt(), 16 * 8 * 2);
    EXPECT_EQ(d.getLocation(), "");
    EXPECT_TRUE(mlir::cast<mlir::RankedTensorType>(d.getType()).getElementType().isF16());
  });
  EXPECT_EQ(decls, 1);
}

TEST(Importer, SmallTypedInitializerBecomesConstantWithItsValues) {
  auto m = matmulModel();
  auto *w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::INT64);
  w->add_dims(3);
  for (int64_t v : {7, -1, 5})
    w->add_int64_data(v);
  mlir::MLIRContext ctx;
  std::string error;
  auto model = import(m, ctx, error);
  ASSERT_TRUE(model.module) << error;
  std::vector<int64_t> values;
  model.module->walk([&](helm::ConstantOp c) {
    for (auto v : mlir::cast<mlir::DenseElementsAttr>(c.getValue()).getValues<int64_t>())
      values.push_back(v);
  });
  EXPECT_EQ(values, (std::vector<int64_t>{7, -1, 5}));
}

TEST(Importer, TypedFieldCountMismatchIsAnError) {
  auto m = matmulModel();
  auto *w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_float_data(1.0f);
  mlir::MLIRContext ctx;
  std::string error;
  auto model = import(m, ctx, error);
  EXPECT_FALSE(model.module);
  EXPECT_EQ(error, "test.onnx: initializer 'w' has 1 typed values but float32[4] has 4 elements");
}

TEST(Importer, UndefinedInputIsAnError) {
  auto m = matmulModel(); // "w" is never defined
  mlir::MLIRContext ctx;
  std::string error;
  EXPECT_FALSE(import(m, ctx, error).module);
  EXPECT_EQ(error, "test.onnx: node 'mm' (MatMul) reads 'w', which no earlier node, graph input or "
                   "initializer defines");
}

TEST(Importer, ExternalDataCanBeAbsentForShapeOnlyImports) {
  auto m = matmulModel();
  auto *w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(64);
  w->add_dims(64);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto *loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("absent.bin");
  mlir::MLIRContext ctx;
  std::string error;
  helm::ImportOptions shapeOnly;
  shapeOnly.requireWeightData = false;
  EXPECT_TRUE(import(m, ctx, error, shapeOnly, "/nonexistent", "t.onnx").module) << error;
  EXPECT_FALSE(import(m, ctx, error, {}, "/nonexistent", "t.onnx").module);
}

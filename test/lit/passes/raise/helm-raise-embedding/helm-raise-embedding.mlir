// RUN: helm-opt %s --helm-raise-embedding | FileCheck %s

helm.weight_decl @table : tensor<256x64xf16> {onnx_name = "embed", location = "", offset = -1, length = 32768}
// CHECK-LABEL: func.func @gather
func.func @gather(%ids: tensor<?x?xi64>) -> (tensor<*xf16>, tensor<*xf16>) {
  %t = helm.weight @table : tensor<256x64xf16>
  // CHECK: %[[E:.*]] = helm.embed %arg0, %{{.*}} : (tensor<?x?xi64>, tensor<256x64xf16>) -> tensor<?x?x64xf16>
  %e = helm.onnx "Gather"(%t, %ids) {attrs = {axis = 0 : i64}, domain = "", node = "embed"} : (tensor<256x64xf16>, tensor<?x?xi64>) -> tensor<*xf16>
  // A gather along another axis is not an embedding lookup.
  // CHECK: helm.onnx "Gather"
  %g = helm.onnx "Gather"(%t, %ids) {attrs = {axis = 1 : i64}, domain = "", node = "cols"} : (tensor<256x64xf16>, tensor<?x?xi64>) -> tensor<*xf16>
  // CHECK: return %[[E]]
  return %e, %g : tensor<*xf16>, tensor<*xf16>
}

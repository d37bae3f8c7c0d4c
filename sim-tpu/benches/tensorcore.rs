//! Cost of costing: how fast `tensorcore::cost` answers (the program builder calls it for every dense layer of
//! every step). `cargo bench -p sim-tpu --bench tensorcore -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sim_tpu::tensorcore::{cost, ChipModel, OpSpec};

fn bench(c: &mut Criterion) {
    let chip = ChipModel::preset("v5p").expect("preset");
    let cases = [
        (
            "matmul_4096",
            r#"{"op":"matmul","params":{"M":4096,"K":4096,"N":4096,"dtype":"bfloat16"}}"#,
        ),
        (
            "conv_3x3",
            r#"{"op":"conv2d_nhwc","params":{"input":[8,56,56,64],"kernel_hwio":[3,3,64,64],"stride":1,"padding":"SAME","dtype":"bfloat16"}}"#,
        ),
        (
            "exp_8192",
            r#"{"op":"exp","params":{"shape":[8192,8192],"dtype":"float32"}}"#,
        ),
    ];
    for (name, text) in cases {
        let op = OpSpec::from_json(text).expect("spec");
        c.bench_function(name, |b| {
            b.iter(|| cost(black_box(&op), black_box(&chip)).expect("cost"))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

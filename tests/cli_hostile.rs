//! The hostile-input suite: malformed and extreme inputs for every command. Each case asserts the exit
//! code (2 for bad input or usage, 1 where a check fails), that nothing panicked, and that the message
//! names what is wrong (the field, file or flag). The cases are generated here from valid inputs by
//! mutation (tools/hostile/README.md says how to add some); files they need go to a temporary folder.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

struct Case {
    args: Vec<String>,
    code: i32,
    says: String,
    /// Paths that must not exist after the case (outputs of a failing command: all or nothing).
    absent: Vec<PathBuf>,
}

fn case(args: &[&str], code: i32, says: &str) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        code,
        says: says.into(),
        absent: Vec::new(),
    }
}

/// A case that must also leave none of `absent` behind.
fn case_leaving(args: &[&str], code: i32, says: &str, absent: &[&Path]) -> Case {
    Case {
        absent: absent.iter().map(|p| p.to_path_buf()).collect(),
        ..case(args, code, says)
    }
}

/// A stored zip of several members (names and bytes), as `np.savez` writes them.
fn zip_members(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in members {
        let one = zip_one(name, data, None);
        let local_len = 30 + name.len() + data.len();
        let at = out.len() as u32;
        out.extend_from_slice(&one[..local_len]);
        let mut cd = one[local_len..local_len + 46 + name.len()].to_vec();
        cd[42..46].copy_from_slice(&at.to_le_bytes());
        central.extend_from_slice(&cd);
    }
    let cd_at = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    let n = members.len() as u16;
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_at.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Where the generated files go: `TPUSIM_HOSTILE_KEEP` (kept, see tools/hostile/README.md) or a
/// temporary folder removed afterwards.
fn scratch() -> PathBuf {
    if let Some(d) = std::env::var_os("TPUSIM_HOSTILE_KEEP") {
        let d = PathBuf::from(d);
        std::fs::create_dir_all(&d).unwrap();
        return d;
    }
    let d = std::env::temp_dir().join(format!("tpusim-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn file(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

/// A stored (uncompressed) zip with one member, whose header may lie about its size.
fn zip_one(member: &str, data: &[u8], declared: Option<u32>) -> Vec<u8> {
    let crc = {
        let mut c = 0xFFFF_FFFFu32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
            }
        }
        !c
    };
    let size = data.len() as u32;
    let usize_decl = declared.unwrap_or(size);
    let mut out = Vec::new();
    let name = member.as_bytes();
    out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
    out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&usize_decl.to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(data);
    let cd = out.len() as u32;
    out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
    out.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&usize_decl.to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0; 12]);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(name);
    let cd_len = out.len() as u32 - cd;
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0]);
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A zip with one deflated member (flate2), whose header may lie about the inflated size.
fn zip_deflated(member: &str, data: &[u8], declared: Option<u32>) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    let packed = enc.finish().unwrap();
    // Build it as stored, then patch method (8 = deflate), the compressed size and the data.
    let mut z = zip_one(member, &packed, Some(declared.unwrap_or(data.len() as u32)));
    let crc = {
        let mut c = 0xFFFF_FFFFu32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
            }
        }
        !c
    };
    z[8] = 8; // local header: compression method
    z[14..18].copy_from_slice(&crc.to_le_bytes());
    let cd = z.len() - 22 - (46 + member.len());
    z[cd + 10] = 8; // central directory: compression method
    z[cd + 16..cd + 20].copy_from_slice(&crc.to_le_bytes());
    z
}

fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let mut h = dict.into_bytes();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

fn cases(dir: &Path) -> Vec<Case> {
    let mut v = Vec::new();
    layout_and_op_cases(&mut v);
    systolic_cases(dir, &mut v);
    spec_cases(dir, &mut v);
    npz_cases(dir, &mut v);
    estimate_and_validate_cases(&mut v);
    fdo_cases(dir, &mut v);
    limits_select_chip_and_compile_cases(dir, &mut v);
    workload_cases(dir, &mut v);
    sweep_bound_and_hlo_cases(dir, &mut v);
    usage_cases(dir, &mut v);
    v.extend(mistakes(dir));
    v
}

/// Shapes for `layout`, and op specs for `op`.
fn layout_and_op_cases(v: &mut Vec<Case>) {
    // Shapes: layout.
    for (s, says) in [
        ("f32[99999999999999999999]", "fits in 64 bits"),
        ("f99[3]", "element type"),
        ("f32[3,", "f32[3,"),
        ("f32[-3]", "f32[-3]"),
        ("f32[3]{1,0}", "f32[3]{1,0}"),
        ("f32[3]{0:T(0)}", "f32[3]{0:T(0)}"),
        ("", "expected"),
        ("(f32[3], s32[", "(f32[3], s32["),
        ("f32[4294967296,4294967296,4294967296]", "f32[4294967296"),
        ("pred[]{:T(", "pred[]"),
        ("f32[1]{0:T(128)L(0)}", "f32[1]"),
        ("token[3]", "token[3]"),
        ("s4[3]{0:T(1024)E(-1)}", "element_size_in_bits"),
        ("f32[3]{0:T(128)L(-2)}", "f32[3]"),
        ("f32[2,2]{0,0}", "f32[2,2]{0,0}"),
        ("f32[2,2]{0,1,2}", "f32[2,2]{0,1,2}"),
        ("f32[<=]", "f32[<=]"),
        ("f32[3]{0:T(128)Q(1)}", "f32[3]"),
        ("f32[3]{0:T(9223372036854775807,9223372036854775807)}", "f32[3]"),
        ("(((((((((((((((((((((((((((((((((f32[1]", ""),
    ] {
        v.push(case(&["layout", s], 2, says));
        v.push(case(&["layout", s, "--json"], 2, ""));
        v.push(case(&["layout", s, "--tpu", "v5p"], 2, ""));
    }
    // Valid per XLA (xla-layout.md): E(0) is "not set" (printed only if != 0), any memory space, and
    // sub-tiles beyond the first never pad; these print back in canonical form, exit 0.
    for (s, printed) in [
        ("s4[3]{0:T(1024)E(0)}", "s4[3]{0:T(1024)}"),
        ("u8[1]{0:S(99)}", "u8[1]{0:S(99)}"),
        (
            "bf16[8]{0:T(8,128)(2,1)(2,1)(2,1)}",
            "bf16[8]{0:T(8,128)(2,1)(2,1)(2,1)}",
        ),
    ] {
        v.push(case(&["layout", s], 0, printed));
        v.push(case(&["layout", s, "--json"], 0, printed));
    }
    v.push(case(&["layout", "f32[3]", "--tpu", "v9"], 2, "v9"));
    v.push(case(&["layout", "f32[3,5]{1,0:T(2,2)}", "--index", "9,9"], 2, "9"));
    v.push(case(
        &["layout", "f32[3,5]{1,0:T(2,2)}", "--offset", "99999"],
        2,
        "99999",
    ));
    // Ops.
    let ops = [
        (
            r#"{"op":"matmul","params":{"M":4611686018427387904,"K":4,"N":4,"dtype":"bfloat16"}}"#,
            "elements",
        ),
        (
            r#"{"op":"matmul","params":{"M":0,"K":4,"N":4,"dtype":"bfloat16"}}"#,
            "M",
        ),
        (
            r#"{"op":"matmul","params":{"M":-1,"K":4,"N":4,"dtype":"bfloat16"}}"#,
            "M",
        ),
        (
            r#"{"op":"matmul","params":{"M":1.5,"K":4,"N":4,"dtype":"bfloat16"}}"#,
            "M",
        ),
        (r#"{"op":"matmul","params":{"K":4,"N":4,"dtype":"bfloat16"}}"#, "M"),
        (
            r#"{"op":"matmul","params":{"M":4,"K":4,"N":4,"dtype":"float64"}}"#,
            "dtype",
        ),
        (r#"{"op":"nope","params":{}}"#, "nope"),
        (r#"{"params":{}}"#, "op"),
        (
            r#"{"op":"add","params":{"shape":[4294967296,4294967296],"dtype":"float32"}}"#,
            "shape",
        ),
        (r#"{"op":"add","params":{"shape":[],"dtype":"float32"}}"#, "shape"),
        (r#"{"op":"add","params":{"shape":"x","dtype":"float32"}}"#, "shape"),
        (
            r#"{"op":"conv2d_nhwc","params":{"input":[1,8,8,3],"kernel_hwio":[9,9,3,8],"stride":1,"padding":"VALID","dtype":"bfloat16"}}"#,
            "",
        ),
        (
            r#"{"op":"conv2d_nhwc","params":{"input":[1,8,8,3],"kernel_hwio":[3,3,3,8],"stride":0,"padding":"SAME","dtype":"bfloat16"}}"#,
            "stride",
        ),
        (
            r#"{"op":"conv2d_nhwc","params":{"input":[1,8,8,3],"kernel_hwio":[3,3,4,8],"stride":1,"padding":"SAME","dtype":"bfloat16"}}"#,
            "",
        ),
        (
            r#"{"op":"conv2d_nhwc","params":{"input":[1,8,8,3],"kernel_hwio":[3,3,3,8],"stride":1,"padding":"FULL","dtype":"bfloat16"}}"#,
            "padding",
        ),
        (r#"{"op":"sc_gather","params":{"rows":0,"row_bytes":512}}"#, "rows"),
        (r#"{"op":"sc_gather","params":{"rows":10,"row_bytes":-1}}"#, "row_bytes"),
        (
            r#"{"op":"batched_matmul","params":{"B":4294967296,"M":4294967296,"K":4,"N":4,"dtype":"bfloat16"}}"#,
            "",
        ),
        (
            r#"{"op":"concatenate","params":{"shapes":[[2,3],[2]],"axis":1,"dtype":"float32"}}"#,
            "",
        ),
        (
            r#"{"op":"concatenate","params":{"shapes":[[2,3],[2,3]],"axis":7,"dtype":"float32"}}"#,
            "axis",
        ),
        ("not json", ""),
        ("[]", ""),
        (r#"{"op":"transpose2d","params":{"shape":[3],"dtype":"float32"}}"#, ""),
        (
            r#"{"op":"mlp_layer","params":{"B":0,"Din":4,"Dout":4,"dtype":"bfloat16"}}"#,
            "B",
        ),
        (
            r#"{"op":"convert","params":{"shape":[4],"dtype":"float32","to":"int3"}}"#,
            "",
        ),
    ];
    for (spec, says) in ops {
        for chip in ["v4", "v5e", "tpu7x"] {
            v.push(case(&["op", "--chip", chip, spec], 2, says));
        }
    }
    v.push(case(
        &[
            "op",
            "--chip",
            "v9",
            r#"{"op":"add","params":{"shape":[4],"dtype":"float32"}}"#,
        ],
        2,
        "v9",
    ));
}

/// SCALE-Sim configurations and topologies for `systolic`.
fn systolic_cases(dir: &Path, v: &mut Vec<Case>) {
    // Systolic.
    let cfg = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/systolic/scale.cfg")).unwrap();
    let good_cfg = file(dir, "good.cfg", cfg.as_bytes());
    for (i, (topo, says)) in [
        (
            "Layer, M, N, K,\nbig, 9223372036854775807, 9223372036854775807, 9223372036854775807,\n",
            "overflow",
        ),
        ("Layer, M, N, K,\nx, 0, 4, 4,\n", "line 2"),
        ("Layer, M, N, K,\nx, -4, 4, 4,\n", "line 2"),
        ("Layer, M, N, K,\nx, 4, 4,\n", "line 2"),
        ("Layer, M, N, K,\nx, four, 4, 4,\n", "four"),
        ("Layer, IH, IW, FH, FW, C, NF,\nc, 4, 4, 9, 9, 3, 8,\n", "larger"),
        (
            "Layer, IH, IW, FH, FW, C, NF,\nc, 4294967296, 4294967296, 1, 1, 4294967296, 8,\n",
            "64 bits",
        ),
        ("Layer, M, N, K,\nx, 4, 4, 4, 4, 4,\n", "line 2"),
    ]
    .iter()
    .enumerate()
    {
        let t = file(dir, &format!("topo{i}.csv"), topo.as_bytes());
        v.push(case(&["systolic", "--cfg", &good_cfg, "--topology", &t], 2, says));
    }
    for (i, (c, says)) in [
        (
            "[architecture_presets]\nArrayHeight: 0\nArrayWidth: 128\nDataflow: ws\n",
            "ArrayHeight",
        ),
        (
            "[architecture_presets]\nArrayHeight: 128\nArrayWidth: x\nDataflow: ws\n",
            "ArrayWidth",
        ),
        (
            "[architecture_presets]\nArrayHeight: 128\nArrayWidth: 128\nDataflow: zz\n",
            "zz",
        ),
        ("", "config"),
    ]
    .iter()
    .enumerate()
    {
        let cf = file(dir, &format!("bad{i}.cfg"), c.as_bytes());
        let t = file(dir, "ok.csv", b"Layer, M, N, K,\nx, 4, 4, 4,\n");
        v.push(case(&["systolic", "--cfg", &cf, "--topology", &t], 2, says));
    }
    v.push(case(
        &[
            "systolic",
            "--cfg",
            "/nonexistent/x.cfg",
            "--topology",
            "/nonexistent/t.csv",
        ],
        2,
        "nonexistent",
    ));
}

/// SPEC.json files for `preprocess`.
fn spec_cases(dir: &Path, v: &mut Vec<Case>) {
    // Preprocess: specs and NPZ files.
    let spec_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/preprocess/example/spec.json"
    ))
    .unwrap();
    let ids = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/ids.npz");
    for (i, (from, to, says)) in [
        (
            "\"num_sc_per_device\": 4",
            "\"num_sc_per_device\": 0",
            "num_sc_per_device",
        ),
        (
            "\"num_sc_per_device\": 4",
            "\"num_sc_per_device\": 3",
            "num_sc_per_device",
        ),
        (
            "\"num_sc_per_device\": 4",
            "\"num_sc_per_device\": -4",
            "num_sc_per_device",
        ),
        ("\"vocabulary_size\": 1000", "\"vocabulary_size\": 0", "vocabulary_size"),
        (
            "\"vocabulary_size\": 1000",
            "\"vocabulary_size\": 99999999999999999999",
            "",
        ),
        ("\"embedding_dim\": 16", "\"embedding_dim\": 0", "embedding_dim"),
        ("\"combiner\": \"sum\"", "\"combiner\": \"max\"", "max"),
        ("\"table\": \"user\"", "\"table\": \"nobody\"", "nobody"),
        ("\"input_shape\": [64, 1]", "\"input_shape\": [64]", "input_shape"),
        (
            "\"input_shape\": [64, 1]",
            "\"input_shape\": [4294967296, 4294967296]",
            "",
        ),
        (
            "\"max_ids_per_partition\": 64",
            "\"max_ids_per_partition\": 0",
            "max_ids_per_partition",
        ),
        (
            "\"stacks\": [[\"user\", \"item\"]]",
            "\"stacks\": [[\"user\", \"ghost\"]]",
            "ghost",
        ),
        (
            "\"global_device_count\": 1",
            "\"global_device_count\": 0",
            "global_device_count",
        ),
        ("{", "[", ""),
        ("\"tables\"", "\"tablez\"", "tablez"),
    ]
    .iter()
    .enumerate()
    {
        let s = file(
            dir,
            &format!("spec{i}.json"),
            spec_text.replacen(from, to, 1).as_bytes(),
        );
        v.push(case(&["preprocess", "--spec", &s, "--ids", ids], 2, says));
        v.push(case(&["preprocess", "--spec", &s, "--ids", ids, "--stats"], 2, ""));
        v.push(case(&["limits", "estimate", "--spec", &s, "--ids", ids], 2, ""));
    }
}

/// NPZ and NPY files for `preprocess`.
fn npz_cases(dir: &Path, v: &mut Vec<Case>) {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/spec.json");
    let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let npz_cases: Vec<(String, Vec<u8>, &str)> = vec![
        (
            "overflow".into(),
            zip_one(
                "user_id.npy",
                &npy("<i4", false, "(4294967296, 4294967296, 16)", &[]),
                None,
            ),
            "more elements",
        ),
        (
            "short".into(),
            zip_one("user_id.npy", &npy("<i4", false, "(64, 1)", &i32s(&[1, 2])), None),
            "data bytes",
        ),
        (
            "liar".into(),
            zip_one("user_id.npy", &npy("<i4", false, "(1, 1)", &i32s(&[1])), Some(u32::MAX)),
            "user_id",
        ),
        (
            "bigendian".into(),
            zip_one("user_id.npy", &npy(">i4", false, "(1, 1)", &i32s(&[1])), None),
            "big-endian",
        ),
        (
            "f8".into(),
            zip_one("user_id.npy", &npy("<f8", false, "(1, 1)", &[0; 8]), None),
            "<f8",
        ),
        (
            "3d".into(),
            zip_one("user_id.npy", &npy("<i4", false, "(1, 1, 1)", &i32s(&[1])), None),
            "2-D",
        ),
        ("notnpy".into(), zip_one("user_id.npy", b"hello world", None), "NPY"),
        ("garbage".into(), b"PK\x03\x04garbage".to_vec(), "npz"),
        ("empty".into(), Vec::new(), "npz"),
        ("text".into(), b"not a zip at all".to_vec(), "npz"),
        (
            "v9".into(),
            zip_one("user_id.npy", b"\x93NUMPY\x09\x00\x10\x00{}", None),
            "version",
        ),
        (
            "nodescr".into(),
            zip_one(
                "user_id.npy",
                &npy("<i4", false, "(1, 1)", &i32s(&[1]))
                    .iter()
                    .map(|&b| if b == b'd' { b'x' } else { b })
                    .collect::<Vec<u8>>(),
                None,
            ),
            "descr",
        ),
        (
            "badshape".into(),
            zip_one("user_id.npy", &npy("<i4", false, "(a, 1)", &i32s(&[1])), None),
            "shape",
        ),
        (
            "splits".into(),
            zip_one("user_id.row_splits.npy", &npy("<i8", false, "(2,)", &[0; 16]), None),
            "values",
        ),
        (
            "fortran3d".into(),
            zip_one("user_id.npy", &npy("<i4", true, "(1, 1, 1)", &i32s(&[1])), None),
            "Fortran",
        ),
    ];
    for (name, bytes, says) in &npz_cases {
        let p = file(dir, &format!("{name}.npz"), bytes);
        v.push(case(&["preprocess", "--spec", spec, "--ids", &p], 2, says));
        v.push(case(&["preprocess", "--spec", spec, "--ids", &p, "--stats"], 2, says));
        v.push(case(&["limits", "estimate", "--spec", spec, "--ids", &p], 2, ""));
        v.push(case(
            &["limits", "validate", "--spec", spec, "--chip", "v5p", "--ids", &p],
            2,
            "",
        ));
    }
    // Deflated members: lying inflated sizes, bombs, and good data.
    let good = npy("<i4", false, "(64, 1)", &i32s(&[1; 64]));
    for (name, bytes, code, says) in [
        ("defl-ok", zip_deflated("user_id.npy", &good, None), 2, "history"),
        ("defl-small", zip_deflated("user_id.npy", &good, Some(16)), 2, "user_id"),
        // Declares 4 GiB but inflates to the good array: refused, the headers disagree with the data.
        (
            "defl-huge",
            zip_deflated("user_id.npy", &good, Some(u32::MAX)),
            2,
            "declare",
        ),
        (
            "defl-bomb",
            zip_deflated("user_id.npy", &npy("<i4", false, "(64, 1)", &vec![0; 1 << 22]), None),
            2,
            "user_id",
        ),
    ] {
        let p = file(dir, &format!("{name}.npz"), &bytes);
        v.push(case(&["preprocess", "--spec", spec, "--ids", &p], code, says));
        v.push(case(&["limits", "estimate", "--spec", spec, "--ids", &p], code, says));
    }
    // NPY header details.
    for (name, npyb, says) in [
        ("descr-u4", npy("<u4", false, "(64, 1)", &i32s(&[1; 64])), "<u4"),
        ("descr-i2", npy("<i2", false, "(64, 1)", &[0; 128]), "<i2"),
        ("descr-obj", npy("|O", false, "(64, 1)", &[0; 64]), "|O"),
        ("neg-shape", npy("<i4", false, "(-64, 1)", &i32s(&[1; 64])), "shape"),
        (
            "huge-shape",
            npy("<i4", false, "(18446744073709551615, 1)", &[]),
            "shape",
        ),
        ("long-data", npy("<i4", false, "(1, 1)", &i32s(&[1; 64])), "user_id"),
        ("wrong-rows", npy("<i4", false, "(32, 1)", &i32s(&[1; 32])), "user_id"),
    ] {
        let p = file(dir, &format!("{name}.npz"), &zip_one("user_id.npy", &npyb, None));
        v.push(case(&["preprocess", "--spec", spec, "--ids", &p], 2, says));
        v.push(case(&["preprocess", "--spec", spec, "--ids", &p, "--stats"], 2, says));
        v.push(case(&["limits", "estimate", "--spec", spec, "--ids", &p], 2, ""));
    }
}

/// Flags of `limits estimate` and `limits validate`.
fn estimate_and_validate_cases(v: &mut Vec<Case>) {
    let (spec, ids) = (EXAMPLE_SPEC, EXAMPLE_IDS);
    // Estimate and validate flags.
    for (args, says) in [
        (
            vec!["limits", "estimate", "--spec", spec, "--ids", ids, "--headroom=-1"],
            "--headroom",
        ),
        (
            vec!["limits", "estimate", "--spec", spec, "--ids", ids, "--headroom", "nan"],
            "--headroom",
        ),
        (
            vec![
                "limits",
                "estimate",
                "--spec",
                spec,
                "--ids",
                ids,
                "--percentile",
                "101",
            ],
            "--percentile",
        ),
        (
            vec!["limits", "estimate", "--spec", spec, "--ids", ids, "--percentile=-5"],
            "--percentile",
        ),
        (
            vec![
                "limits",
                "estimate",
                "--spec",
                spec,
                "--ids",
                ids,
                "-o",
                "/proc/tpusim-no/l.json",
            ],
            "/proc/tpusim-no",
        ),
        (
            vec![
                "limits",
                "estimate",
                "--spec",
                spec,
                "--ids",
                ids,
                "--fdo-out",
                "/proc/tpusim-no",
            ],
            "/proc/tpusim-no",
        ),
        (vec!["limits", "validate", "--spec", spec, "--chip", "v9"], "v9"),
        (
            vec![
                "limits",
                "validate",
                "--spec",
                spec,
                "--chip",
                "v5p",
                "--fdo",
                "/nonexistent/fdo",
            ],
            "nonexistent",
        ),
        (vec!["limits", "compile-check", "--chip", "v5p"], ""),
    ] {
        v.push(case(&args, 2, says));
    }
}

/// FDO directories, limits files and the checks that fail on them.
fn fdo_cases(dir: &Path, v: &mut Vec<Case>) {
    let spec = EXAMPLE_SPEC;
    // FDO directories: CSV and NPZ stats.
    for (i, (csv, says)) in [
        ("key,values\nuser_item_max_ids,1 2 x\n", "line 2"),
        ("keys,values\n", "line 1"),
        ("key,values\nuser_item_bogus,1\n", "user_item_bogus"),
        ("key,values\nuser_item_max_ids 1 2\n", "line 2"),
        (
            "key,values\nuser_item_max_ids,99999999999999999999\n",
            "99999999999999999999",
        ),
        ("", "line 1"),
    ]
    .iter()
    .enumerate()
    {
        let d = dir.join(format!("fdo{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let f = file(&d, "host.csv", csv.as_bytes());
        let d = d.to_string_lossy().into_owned();
        v.push(case(
            &["limits", "validate", "--spec", spec, "--chip", "v5p", "--fdo", &d],
            2,
            says,
        ));
        v.push(case(
            &[
                "limits", "validate", "--spec", spec, "--chip", "v5p", "--fdo", &d, "--json",
            ],
            2,
            &f,
        ));
    }
    for (i, (bytes, says)) in [
        (
            zip_one("user_item_max_ids.npy", &npy("<f4", false, "(1, 4)", &[0; 16]), None),
            "user_item_max_ids",
        ),
        (
            zip_one("user_item_nothing.npy", &npy("<i8", false, "(1, 1)", &[0; 8]), None),
            "user_item_nothing",
        ),
        (
            zip_one("user_item_max_ids.npy", &npy("<i8", false, "(1, 1, 1)", &[0; 8]), None),
            "user_item_max_ids",
        ),
        (
            zip_one(
                "user_item_max_ids.npy",
                &npy("<i8", false, "(4294967296, 4294967296)", &[]),
                None,
            ),
            "user_item_max_ids",
        ),
        (
            zip_one(
                "user_item_max_ids.npy",
                &npy("<i8", false, "(1, 4)", &[0; 8]),
                Some(u32::MAX),
            ),
            "user_item_max_ids",
        ),
        (b"not a zip".to_vec(), "npz"),
    ]
    .iter()
    .enumerate()
    {
        let d = dir.join(format!("fdonpz{i}"));
        std::fs::create_dir_all(&d).unwrap();
        file(&d, "fdo_stats_0_0.npz", bytes);
        let d = d.to_string_lossy().into_owned();
        v.push(case(
            &["limits", "validate", "--spec", spec, "--chip", "v5p", "--fdo", &d],
            2,
            says,
        ));
        v.push(case(
            &[
                "limits", "validate", "--spec", spec, "--chip", "v5p", "--fdo", &d, "--json",
            ],
            2,
            "fdo_stats_0_0.npz",
        ));
    }
    let empty_fdo = dir.join("fdo-empty");
    std::fs::create_dir_all(&empty_fdo).unwrap();
    v.push(case(
        &[
            "limits",
            "validate",
            "--spec",
            spec,
            "--chip",
            "v5p",
            "--fdo",
            &empty_fdo.to_string_lossy(),
        ],
        2,
        "no fdo_stats",
    ));
}

/// Limits files that do not fit, `select` inputs, chip files and compile checks.
fn limits_select_chip_and_compile_cases(dir: &Path, v: &mut Vec<Case>) {
    let (spec, ids) = (EXAMPLE_SPEC, EXAMPLE_IDS);
    // Limits files in TOML, and limits that do not fit (a failed check: exit 1).
    for (i, (text, says)) in [
        (
            "[stacks.user_item]\nmax_ids_per_partition = 0\nmax_unique_ids_per_partition = 8\n",
            "stacks.user_item.max_ids_per_partition",
        ),
        (
            "[stacks.user_item]\nmax_ids_per_partition = 4294967296\nmax_unique_ids_per_partition = 8\n",
            "max_ids_per_partition",
        ),
        (
            "[stacks.user_item]\nmax_ids_per_partition = \"x\"\nmax_unique_ids_per_partition = 8\n",
            "stacks.user_item.max_ids_per_partition",
        ),
        (
            "[stacks.user_item]\nmax_ids_per_partition = 8\n",
            "max_unique_ids_per_partition",
        ),
        (
            "[stacks.user_item]\nmax_ids_per_partition = 8\nmax_unique_ids_per_partition = 8\nbogus = 1\n",
            "bogus",
        ),
        ("stacks = [", "limits"),
    ]
    .iter()
    .enumerate()
    {
        let l = file(dir, &format!("limits{i}.toml"), text.as_bytes());
        v.push(case(
            &["limits", "validate", "--spec", spec, "--chip", "v5p", "--limits", &l],
            2,
            says,
        ));
        v.push(case(
            &["limits", "validate", "--spec", spec, "--chip", "v5p", "--limits", &l],
            2,
            &format!("limits{i}.toml"),
        ));
    }
    let tight = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/limits/example/tight.toml");
    v.push(case(
        &[
            "limits", "validate", "--spec", spec, "--chip", "v5p", "--limits", tight, "--ids", ids,
        ],
        1,
        "",
    ));
    // Select inputs.
    for (i, (text, says)) in [
        ("{\"ops\": 3}", ""),
        ("not json", "sel"),
        ("[]", "sel"),
        ("", "sel"),
        ("{\"nodes\": [{\"op\": 7}]}", "sel"),
    ]
    .iter()
    .enumerate()
    {
        let p = file(dir, &format!("sel{i}.json"), text.as_bytes());
        v.push(case(&["select", &p, "--chip", "v5p"], 2, says));
        v.push(case(&["select", &p, "--chip", "v9"], 2, ""));
    }
    // Chip files.
    for (i, (text, says)) in [
        ("{\"hbm_bytes_per_s\": \"fast\"}", "hbm_bytes_per_s"),
        ("{\"chip\": \"v9\"}", "v9"),
        ("{\"nope\": 1}", "nope"),
        ("{\"hbm_bytes_per_s\": -1}", "hbm_bytes_per_s"),
        ("not json", "chip"),
    ]
    .iter()
    .enumerate()
    {
        let cfp = file(dir, &format!("chip{i}.json"), text.as_bytes());
        v.push(case(&["chips", "--chip", "v5p", "--chip-file", &cfp], 2, says));
        v.push(case(&["run", "--preset", "dlrm-small", "--chip-file", &cfp], 2, says));
    }
    v.push(case(
        &["preprocess", "--spec", "/nonexistent/spec.json", "--ids", ids],
        2,
        "nonexistent",
    ));
    v.push(case(
        &["preprocess", "--spec", spec, "--ids", "/nonexistent/ids.npz"],
        2,
        "nonexistent",
    ));
    // Compile checks.
    for (c, says) in [
        (
            r#"{"kind": "fwd", "vocab": 0, "dim": 8, "batch": 8, "max_ids": 8, "max_unique": 8}"#,
            "vocab",
        ),
        (
            r#"{"kind": "nope", "vocab": 8, "dim": 8, "batch": 8, "max_ids": 8, "max_unique": 8}"#,
            "nope",
        ),
        (
            r#"{"kind": "fwd", "vocab": 8, "dim": 8, "batch": 8, "max_ids": 8}"#,
            "max_unique",
        ),
        (
            r#"{"kind": "fwd", "vocab": -8, "dim": 8, "batch": 8, "max_ids": 8, "max_unique": 8}"#,
            "vocab",
        ),
        (
            r#"{"kind": "fwd", "vocab": 8, "dim": 8, "batch": 8, "max_ids": 8, "max_unique": 8, "extra": 1}"#,
            "extra",
        ),
        ("not json", ""),
    ] {
        for chip in ["v5p", "v6e", "tpu7x"] {
            v.push(case(&["limits", "compile-check", "--chip", chip, c], 2, says));
        }
    }
    v.push(case(
        &[
            "limits",
            "compile-check",
            "--chip",
            "v5e",
            r#"{"kind": "fwd", "vocab": 8, "dim": 8, "batch": 8, "max_ids": 8, "max_unique": 8}"#,
        ],
        2,
        "v5e",
    ));
    for (i, (text, says)) in [
        ("{\"stacks\": {\"user_item\": {\"max_ids_per_partition\": -1}}}", ""),
        ("{\"stacks\": 3}", "stacks"),
        ("not json or toml [", ""),
        (
            "{\"stacks\": {\"user_item\": {\"max_ids_per_partition\": 99999999999999999999999}}}",
            "",
        ),
    ]
    .iter()
    .enumerate()
    {
        let l = file(dir, &format!("limits{i}.json"), text.as_bytes());
        v.push(case(
            &[
                "limits", "validate", "--spec", spec, "--chip", "v5p", "--limits", &l, "--ids", ids,
            ],
            2,
            says,
        ));
    }
}

/// Workloads for `run` and `sweep`, with mutated fields.
fn workload_cases(dir: &Path, v: &mut Vec<Case>) {
    // Workloads: run and sweep with mutated fields.
    let sets: Vec<(String, &str)> = vec![
        ("features.0.valency={\"fixed\":1000000000000}".into(), "valency"),
        ("features.0.valency={\"fixed\":2147483648}".into(), "valency"),
        ("features.0.valency={\"fixed\":0}".into(), "valency"),
        ("features.0.valency={\"uniform\":[5,2]}".into(), "valency"),
        ("features.0.valency={\"poisson\":-1}".into(), "valency"),
        ("features.0.valency={\"poisson\":1e300}".into(), "valency"),
        ("features.0.ids={\"zipf\":0}".into(), "zipf"),
        ("features.0.ids={\"zipf\":-2}".into(), "zipf"),
        ("features.0.ids={\"zipf\":1000}".into(), "zipf"),
        ("features.0.ids={\"hot_set\":{\"fraction\":2,\"size\":4}}".into(), "fraction"),
        ("features.0.ids={\"hot_set\":{\"fraction\":0.5,\"size\":0}}".into(), "size"),
        ("features.0.table=nope".into(), "nope"),
        ("tables.0.vocab=0".into(), "vocab"),
        ("tables.0.vocab=4294967296".into(), "vocab"),
        ("tables.0.dim=0".into(), "dim"),
        ("tables.0.dim=99999999".into(), "dim"),
        ("tables.0.dtype=f64".into(), "f64"),
        ("global_batch=4294967296".into(), "global_batch"),
        ("global_batch=0".into(), "global_batch"),
        ("global_batch=4097".into(), "global_batch"),
        ("chips=3".into(), "chips"),
        ("chips=0".into(), "chips"),
        ("chips=131072".into(), "chips"),
        ("steps=0".into(), "steps"),
        ("steps=4294967295".into(), "steps"),
        ("topology=4x4x4".into(), "topology"),
        ("topology=axbxc".into(), "topology"),
        ("pipelining=sideways".into(), "sideways"),
        ("host.threads=0".into(), "host"),
        ("host.ids_per_s_per_thread=-1".into(), "host"),
        ("limits.max_ids_per_chip_per_sample=0".into(), "max_ids_per_chip_per_sample"),
        ("limits.max_ids_per_table.nobody=8".into(), "nobody"),
        ("limits.max_ids_per_table.t0=0".into(), "t0"),
        ("nope=1".into(), "nope"),
        ("tables.99.dim=3".into(), "99"),
        ("chip.nope=1".into(), "nope"),
        ("chip.hbm_bytes_per_s=fast".into(), "hbm_bytes_per_s"),
        ("functional_learning_rate=-1".into(), "functional_learning_rate"),
        ("quantization={\"quantization_config_num_buckets\":1,\"quantization_config_low\":0,\"quantization_config_high\":1}".into(), "quantization"),
        ("megacore=maybe".into(), "megacore"),
        ("dense.gradient_dtype=f8".into(), "f8"),
        ("dense.interaction=triangle".into(), "triangle"),
        ("dense.hlo=/nonexistent/step.hlo".into(), "nonexistent"),
        ("limits.file=/nonexistent/limits.json".into(), "nonexistent"),
        ("features.0.ids={\"npz\":[]}".into(), "npz"),
        ("features.0.ids={\"npz\":[\"/nonexistent/a.npz\"]}".into(), "nonexistent"),
        ("xla_sc_num_serialized_tables_to_optimize_hbm=-1".into(), ""),
        ("seed=-5".into(), ""),
    ];
    for (s, says) in &sets {
        v.push(case(&["run", "--preset", "dlrm-small", "--set", s], 2, says));
        v.push(case(&["run", "--preset", "dlrm-small", "--json", "--set", s], 2, says));
        v.push(case(
            &[
                "sweep",
                "--preset",
                "dlrm-small",
                "--chip",
                "v5p",
                "--chips",
                "4",
                "--batch",
                "4096",
                "--set",
                s,
                "-o",
                &dir.join("sw").to_string_lossy(),
            ],
            2,
            "",
        ));
    }
    for (i, text) in [
        "name = \"x\"\n",
        "this is [not toml",
        "{\"name\": 3}",
        "name = \"x\"\nchip = \"v9\"\nchips = 4\nglobal_batch = 4096\nsteps = 2\npipelining = \"pipelined\"\ntables = []\nfeatures = []\n[dense]\ndense_features = 1\nbottom = [8]\ninteraction = \"dot\"\ntop = [1]\n",
        "name = \"x\"\nchip = \"v5p\"\nchips = 4\nglobal_batch = 4096\nsteps = 2\npipelining = \"pipelined\"\nunknown_field = 1\ntables = []\nfeatures = []\n[dense]\ndense_features = 1\nbottom = [8]\ninteraction = \"dot\"\ntop = [1]\n",
        "\u{0}\u{1}\u{2}",
    ]
    .iter()
    .enumerate()
    {
        let p = file(dir, &format!("w{i}.toml"), text.as_bytes());
        v.push(case(&["run", &p], 2, &format!("w{i}.toml")));
    }
    v.push(case(&["run", "/nonexistent/workload.toml"], 2, "nonexistent"));
    v.push(case(&["run", "--preset", "nope"], 2, "nope"));
    v.push(case(&["run", "--preset", "dlrm-small", "--chip", "v9"], 2, "v9"));
    v.push(case(&["run", "--preset", "dlrm-small", "--chips", "3"], 2, "chips"));
    v.push(case(
        &["run", "--preset", "dlrm-small", "--batch", "18446744073709551615"],
        2,
        "global_batch",
    ));
    v.push(case(
        &["run", "--preset", "dlrm-small", "--steps", "4294967295"],
        2,
        "--max-steps",
    ));
    v.push(case(
        &["run", "--preset", "dlrm-small", "--batch", "1073741824"],
        2,
        "--max-ids",
    ));
    v.push(case(
        &["run", "--preset", "dlrm-small", "--trace", "/proc/tpusim-no/t.json"],
        2,
        "--trace",
    ));
    v.push(case(
        &["run", "--preset", "dlrm-small", "--pipelining", "both"],
        2,
        "both",
    ));
    v.push(case(
        &["run", "--preset", "dlrm-small", "--chip-file", "/nonexistent/chip.json"],
        2,
        "nonexistent",
    ));
    let cf = file(dir, "chipfile.json", b"[1,2,3]");
    v.push(case(
        &["run", "--preset", "dlrm-small", "--chip-file", &cf],
        2,
        "chip file",
    ));
    v.push(case(&["chips", "--chip-file", &cf], 2, ""));
    let cf2 = file(dir, "chipfile2.json", b"{\"hbm_gb\": 1}");
    v.push(case(&["chips", "--chip", "v4", "--chip-file", &cf2], 2, "hbm_gb"));
    v.push(case(&["chips", "--chip", "v9"], 2, "v9"));
}

/// Sweeps, the stated bounds, and HLO text.
fn sweep_bound_and_hlo_cases(dir: &Path, v: &mut Vec<Case>) {
    // Sweeps.
    let out = dir.join("sweep").to_string_lossy().into_owned();
    for (args, says) in [
        (
            vec![
                "--chip",
                "v5p",
                "--chips",
                "4",
                "--batch",
                "4611686018427387904..18446744073709551615x2",
            ],
            "global_batch",
        ),
        (
            vec![
                "--chip",
                "v5p,v6e",
                "--chips",
                "4,8",
                "--batch",
                "1..18446744073709551615x2",
                "--max-configs",
                "10",
            ],
            "--max-configs",
        ),
        (vec!["--chip", "v5p", "--chips", "4", "--batch", "4096..1x2"], "--batch"),
        (
            vec!["--chip", "v5p", "--chips", "4", "--batch", "4096..8192x1"],
            "--batch",
        ),
        (vec!["--chip", "v5p", "--chips", "4", "--batch", "x"], "--batch"),
        (vec!["--chip", "v9", "--chips", "4", "--batch", "4096"], "v9"),
        (
            vec!["--chip", "v5p", "--chips", "3", "--batch", "4096"],
            "chips must be a power of two",
        ),
        (
            vec![
                "--chip",
                "v5p",
                "--chips",
                "4",
                "--batch",
                "4096",
                "--steps",
                "4294967295",
            ],
            "",
        ),
        (
            vec!["--chip", "v5p", "--chips", "4", "--batch", "4096", "--price", "v5p"],
            "--price",
        ),
        (
            vec![
                "--chip",
                "v5p",
                "--chips",
                "4",
                "--batch",
                "4096",
                "--limits",
                "/nonexistent/l.json",
            ],
            "nonexistent",
        ),
        (
            vec!["--chip", "v5p", "--chips", "4", "--batch", "4096", "--shard", "3/2"],
            "3/2",
        ),
        (
            vec!["--chip", "v5p", "--chips", "4", "--batch", "4096", "--shard", "x"],
            "x",
        ),
    ] {
        let mut a = vec!["sweep", "--preset", "dlrm-small"];
        a.extend(args);
        a.extend(["-o", &out]);
        v.push(case(&a, 2, says));
    }
    // Stated bounds: refused up front (no ids generated), naming the bound's flag.
    for (extra, says) in [
        (vec!["--steps", "4294967295"], "--max-steps"),
        (vec!["--set", "steps=4294967295"], "--max-steps"),
        (vec!["--steps", "20", "--max-steps", "10"], "--max-steps"),
        (vec!["--max-ids", "1000"], "--max-ids"),
    ] {
        let mut a = vec![
            "sweep",
            "--preset",
            "dlrm-small",
            "--chip",
            "v5p",
            "--chips",
            "4",
            "--batch",
            "4096",
        ];
        a.extend(extra);
        a.extend(["-o", &out]);
        v.push(case(&a, 2, says));
    }
    v.push(case(
        &["sweep", "--merge", "/nonexistent/shards", "-o", &out],
        2,
        "nonexistent",
    ));
    // HLO text.
    for (i, (text, says)) in [
        ("HloModule m\n\nENTRY e {\n  ROOT p = f32[4] parameter(0\n}\n", "line"),
        ("HloModule m\n\nENTRY e {\n  ROOT x = f32[4] add(y, z)\n}\n", ""),
        ("garbage", "line"),
        ("", ""),
        ("HloModule m\n\nENTRY e {\n  ROOT p = f32[99999999999999999999] parameter(0)\n}\n", ""),
        ("HloModule m\n\nc {\n  ROOT r = f32[] call(), to_apply=c\n}\n\nENTRY e {\n  ROOT x = f32[] call(), to_apply=c\n}\n", ""),
        ("\u{0}\u{ff}", ""),
    ]
    .iter()
    .enumerate()
    {
        let p = file(dir, &format!("m{i}.hlo"), text.as_bytes());
        v.push(case(&["hlo", &p, "--chip", "v5e"], 2, says));
        v.push(case(&["hlo", &p, "--chip", "v5e", "--json"], 2, ""));
    }
    // No ROOT: the last instruction is the root, as in XLA's parser (accepted).
    let m = file(
        dir,
        "noroot.hlo",
        b"HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n}\n",
    );
    v.push(case(&["hlo", &m, "--chip", "v5e"], 0, ""));
    v.push(case(&["hlo", "/nonexistent/m.hlo", "--chip", "v5e"], 2, "nonexistent"));
    v.push(case(
        &["hlo", &m, "--chip", "v5e", "--max-bytes", "8"],
        2,
        "--max-bytes",
    ));
    v.push(case(&["hlo", &m, "--chip", "v9"], 2, "v9"));
    v.push(case(&["hlo", &m, "--chip", "v5e", "--set", "chip.nope=1"], 2, "nope"));
    v.push(case(
        &["hlo", &m, "--chip", "v5e", "--trace", "/proc/tpusim-no/t.json"],
        2,
        "/proc/tpusim-no",
    ));
}

/// `select`, `explain`, `demo` and usage mistakes.
fn usage_cases(dir: &Path, v: &mut Vec<Case>) {
    let ids = EXAMPLE_IDS;
    // Select, explain, demo, usage.
    let sel = file(dir, "sel.json", b"{\"ops\": 3}");
    v.push(case(&["select", &sel, "--chip", "v5p"], 2, ""));
    v.push(case(
        &["select", "/nonexistent/sel.json", "--chip", "v5p"],
        2,
        "nonexistent",
    ));
    v.push(case(&["explain", "nope"], 2, "nope"));
    v.push(case(
        &["explain", "limits", "--spec", "/nonexistent/s.json", "--ids", ids],
        2,
        "nonexistent",
    ));
    v.push(case(&["nope"], 2, "nope"));
    v.push(case(&["run", "--bogus-flag"], 2, "--bogus-flag"));
    v.push(case(&["demo", "--out", "/proc/tpusim-cannot-write-here"], 2, ""));
}

/// The example of the preprocess contract: (SPEC.json, ids.npz).
const EXAMPLE_SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/spec.json");
const EXAMPLE_IDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/ids.npz");
const SCALE_CFG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/systolic/scale.cfg");

/// A limits file setting `max_ids` for one stack name.
fn limits_file(dir: &Path, name: &str, stack: &str, max_ids: u64) -> String {
    let text = format!(
        r#"{{"stacks": {{"{stack}": {{"max_ids_per_partition": {max_ids}, "max_unique_ids_per_partition": 8}}}}}}"#
    );
    file(dir, name, text.as_bytes())
}

/// The user's mistakes (issue 26): names that match nothing, inputs that disagree with each other,
/// values that cannot mean anything, and outputs of failing commands, which must leave no file.
fn mistakes(dir: &Path) -> Vec<Case> {
    let mut v = mistaken_names(dir);
    v.extend(mistaken_ids(dir));
    v.extend(mistaken_values(dir));
    v.extend(half_written_outputs(dir));
    v
}

/// Names in limits files, FDO directories, `stack_limits` and workloads that match nothing.
fn mistaken_names(dir: &Path) -> Vec<Case> {
    let mut v = Vec::new();
    let (spec, ids) = (EXAMPLE_SPEC, EXAMPLE_IDS);
    let limits = |name: &str, stack: &str, max_ids: u64| limits_file(dir, name, stack, max_ids);
    // Names that match nothing: a limits file, an FDO directory, a spec's stack_limits, a workload.
    let typo = limits("typo-limits.json", "usr_item", 64);
    v.push(case(
        &[
            "limits", "validate", "--spec", spec, "--chip", "v5p", "--limits", &typo, "--ids", ids,
        ],
        2,
        "did you mean 'user_item'",
    ));
    let fdo = dir.join("typo-fdo");
    std::fs::create_dir_all(&fdo).unwrap();
    std::fs::write(fdo.join("stats.csv"), "key,values\ncountri_max_ids,8 8 8 8\n").unwrap();
    let fdo_s = fdo.to_string_lossy().into_owned();
    v.push(case(
        &[
            "limits", "validate", "--spec", spec, "--chip", "v5p", "--fdo", &fdo_s, "--ids", ids,
        ],
        2,
        "countri",
    ));
    let spec_text = std::fs::read_to_string(spec).unwrap();
    let s = file(
        dir,
        "typo-stack-limits.json",
        spec_text.replace("\"user_item\":", "\"usr_item\":").as_bytes(),
    );
    v.push(case(
        &["preprocess", "--spec", &s, "--ids", ids],
        2,
        "stack_limits.usr_item",
    ));
    let small_typo = limits("typo-small.json", "t0_t1_t2_t3_t4_t5_t6_t8", 64);
    v.push(case(
        &[
            "run",
            "--preset",
            "dlrm-small",
            "--steps",
            "2",
            "--set",
            &format!("limits.file={small_typo}"),
        ],
        2,
        "t0_t1_t2_t3_t4_t5_t6_t8",
    ));
    v.push(case(
        &[
            "run",
            "--preset",
            "dlrm-small",
            "--steps",
            "2",
            "--set",
            "limits.max_ids_per_table.t9=64",
        ],
        2,
        "limits.max_ids_per_table",
    ));
    v
}

/// NPZ ids that disagree with SPEC.json, and generated ids past their table.
fn mistaken_ids(dir: &Path) -> Vec<Case> {
    let mut v = Vec::new();
    // Spec against NPZ: one feature 'f' of table 't' (vocabulary 32), [8, 4] ids.
    let one = file(
        dir,
        "one-spec.json",
        br#"{"num_sc_per_device": 4, "tables": [{"name": "t", "vocabulary_size": 32, "embedding_dim": 8, "combiner": "sum"}],
            "features": [{"name": "f", "table": "t", "input_shape": [8, 4]}]}"#,
    );
    let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let i64s = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let dense = |ids: &[i32]| npy("<i4", false, "(8, 4)", &i32s(ids));
    let mut past = vec![1; 32];
    past[7] = 32;
    let mut nan = vec![1.0f32; 32];
    nan[3] = f32::NAN;
    let mut wide64 = vec![1i64; 32];
    wide64[5] = 1 << 40;
    for (name, members, code, says) in [
        (
            "shape",
            vec![("f.npy", npy("<i4", false, "(8, 3)", &i32s(&[1; 24])))],
            2,
            "input_shape",
        ),
        ("vocab", vec![("f.npy", dense(&past))], 2, "id 32 at position 7"),
        (
            "nan-weights",
            vec![
                ("f.npy", dense(&[1; 32])),
                ("f.weights.npy", npy("<f4", false, "(8, 4)", &f32s(&nan))),
            ],
            2,
            "weight NaN",
        ),
        (
            "neg-splits",
            vec![
                ("f.values.npy", npy("<i4", false, "(4,)", &i32s(&[1; 4]))),
                (
                    "f.row_splits.npy",
                    npy("<i8", false, "(9,)", &i64s(&[0, 1, 2, -3, 4, 4, 4, 4, 4])),
                ),
            ],
            2,
            "f.row_splits",
        ),
        (
            "down-splits",
            vec![
                ("f.values.npy", npy("<i4", false, "(4,)", &i32s(&[1; 4]))),
                (
                    "f.row_splits.npy",
                    npy("<i8", false, "(9,)", &i64s(&[0, 2, 1, 3, 4, 4, 4, 4, 4])),
                ),
            ],
            2,
            "row_splits must not decrease",
        ),
        (
            "int64-ok",
            vec![("f.npy", npy("<i8", false, "(8, 4)", &i64s(&[3; 32])))],
            0,
            "",
        ),
        (
            "int64-wide",
            vec![("f.npy", npy("<i8", false, "(8, 4)", &i64s(&wide64)))],
            2,
            "id 1099511627776 at position 5",
        ),
    ] {
        let p = file(dir, &format!("mistake-{name}.npz"), &zip_members(&members));
        v.push(case(&["preprocess", "--spec", &one, "--ids", &p], code, says));
        v.push(case(
            &["preprocess", "--spec", &one, "--ids", &p, "--stats"],
            code,
            says,
        ));
        v.push(case(&["limits", "estimate", "--spec", &one, "--ids", &p], code, says));
    }
    // A stored member whose headers declare more bytes than it holds.
    let p = file(
        dir,
        "mistake-declared.npz",
        &zip_one("f.npy", &dense(&[1; 32]), Some(4096)),
    );
    v.push(case(&["preprocess", "--spec", &one, "--ids", &p], 2, "declare"));
    // Generated ids: a hot set larger than the vocabulary, or a stride past it.
    v.push(case(
        &[
            "run",
            "--preset",
            "skewed",
            "--steps",
            "2",
            "--set",
            "tables.0.vocab=10",
        ],
        2,
        "hot_set",
    ));
    v
}

/// Numbers that cannot mean anything, and messages that must name the workload field.
fn mistaken_values(dir: &Path) -> Vec<Case> {
    let mut v = Vec::new();
    let (spec, ids) = (EXAMPLE_SPEC, EXAMPLE_IDS);
    let spec_text = std::fs::read_to_string(spec).unwrap();
    let limits = |name: &str, stack: &str, max_ids: u64| limits_file(dir, name, stack, max_ids);
    // Values that cannot mean anything.
    v.push(case(
        &[
            "run",
            "--preset",
            "dlrm-small",
            "--steps",
            "2",
            "--set",
            "limits.max_ids_per_partition=3000000000",
        ],
        2,
        "limits.max_ids_per_partition = 3000000000",
    ));
    let big = file(
        dir,
        "big-limit-spec.json",
        spec_text
            .replacen(
                "\"max_ids_per_partition\": 64",
                "\"max_ids_per_partition\": 3000000000",
                1,
            )
            .as_bytes(),
    );
    v.push(case(&["preprocess", "--spec", &big, "--ids", ids], 2, "3000000000"));
    let big_l = limits("big-limits.json", "user_item", 3_000_000_000);
    v.push(case(
        &[
            "limits", "validate", "--spec", spec, "--chip", "v5p", "--limits", &big_l, "--ids", ids,
        ],
        2,
        "3000000000",
    ));
    let zero_rate = file(dir, "zero-rate.json", br#"{"hbm_bytes_per_s": 0}"#);
    v.push(case(
        &[
            "run",
            "--preset",
            "dlrm-small",
            "--steps",
            "2",
            "--chip-file",
            &zero_rate,
        ],
        2,
        "hbm_bytes_per_s",
    ));
    v.push(case(
        &[
            "run",
            "--preset",
            "dlrm-small",
            "--steps",
            "2",
            "--set",
            "chip.sc_clock_mhz=0",
        ],
        2,
        "sc_clock_mhz",
    ));
    let cfg = SCALE_CFG;
    let empty = file(
        dir,
        "no-layers.csv",
        b"Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n",
    );
    v.push(case(&["systolic", "--cfg", cfg, "--topology", &empty], 2, "no layers"));
    v.push(case(
        &[
            "op",
            "--chip",
            "v5e",
            r#"{"op":"tc_gather","params":{"rows":4294967296,"row_bytes":4294967296}}"#,
        ],
        2,
        "row_bytes",
    ));
    // Messages in the user's words.
    v.push(case(
        &[
            "run",
            "--preset",
            "dlrm-small",
            "--steps",
            "2",
            "--set",
            "dense.dense_features=1000000000000",
        ],
        2,
        "dense.dense_features = 1000000000000",
    ));
    v
}

/// Output sets of failing commands: none of their files may appear.
fn half_written_outputs(dir: &Path) -> Vec<Case> {
    let mut v = Vec::new();
    let (spec, ids, cfg) = (EXAMPLE_SPEC, EXAMPLE_IDS, SCALE_CFG);
    // Outputs: all or nothing. Each case has its own directory.
    let out = |name: &str| dir.join(format!("out-{name}"));
    let est = out("estimate");
    std::fs::create_dir_all(&est).unwrap();
    std::fs::write(est.join("fdo"), b"a file where a directory is expected").unwrap();
    let (l, d) = (est.join("limits.json"), est.join("fdo"));
    v.push(case_leaving(
        &[
            "limits",
            "estimate",
            "--spec",
            spec,
            "--ids",
            ids,
            "-o",
            &l.to_string_lossy(),
            "--fdo-out",
            &d.to_string_lossy(),
        ],
        2,
        "--fdo-out",
        &[&l],
    ));
    for (name, blocker, args) in [
        (
            "run",
            "gantt.svg",
            vec!["run", "--preset", "dlrm-small", "--steps", "2", "-o"],
        ),
        ("demo", "trace.json", vec!["demo", "-o"]),
        (
            "sweep",
            "sweep.json",
            vec![
                "sweep",
                "--preset",
                "dlrm-small",
                "--chip",
                "v5p",
                "--chips",
                "4",
                "--batch",
                "4096",
                "--steps",
                "2",
                "-o",
            ],
        ),
        (
            "systolic",
            "COMPUTE_REPORT.csv",
            vec![
                "systolic",
                "--cfg",
                cfg,
                "--topology",
                concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/systolic/gemm.csv"),
                "-o",
            ],
        ),
    ] {
        let d = out(name);
        std::fs::create_dir_all(d.join(blocker)).unwrap();
        let ds = d.to_string_lossy().into_owned();
        let mut a = args.clone();
        a.push(&ds);
        let firsts = ["report.html", "summary.json", "sweep.csv", "gantt.png", "busy.svg"].map(|f| d.join(f));
        let refs: Vec<&Path> = firsts.iter().map(|p| p.as_path()).collect();
        v.push(case_leaving(&a, 2, blocker, &refs));
    }
    // A sweep whose output directory is a file; a sweep in which no configuration can run.
    let f = file(dir, "out-sweep-file", b"x");
    v.push(case(
        &[
            "sweep",
            "--preset",
            "dlrm-small",
            "--chip",
            "v5p",
            "--chips",
            "4",
            "--batch",
            "4096",
            "--steps",
            "2",
            "-o",
            &f,
        ],
        2,
        "a directory is expected",
    ));
    let none = out("sweep-none");
    let ns = none.to_string_lossy().into_owned();
    v.push(case_leaving(
        &[
            "sweep",
            "--preset",
            "dlrm-small",
            "--chip",
            "v5e",
            "--chips",
            "4",
            "--batch",
            "4096",
            "--steps",
            "2",
            "-o",
            &ns,
        ],
        2,
        "v5e",
        &[&none],
    ));
    let lesson = out("lesson");
    let svg_dir = out("lesson-svg");
    std::fs::create_dir_all(&svg_dir).unwrap();
    v.push(case_leaving(
        &[
            "explain",
            "pipelining",
            "--html",
            &lesson.to_string_lossy(),
            "-o",
            &svg_dir.to_string_lossy(),
        ],
        2,
        "is a directory",
        &[&lesson],
    ));
    v
}

/// Seconds one case may run: a refusal is immediate, so a case still running is a hang.
const LIMIT_S: u64 = 30;

/// Runs the binary, killing it after [`LIMIT_S`] seconds (then None).
fn run_bounded(bin: &str, args: &[String]) -> Option<std::process::Output> {
    use std::io::Read;
    let mut child = Command::new(bin)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Drain the pipes on threads so a chatty child never blocks on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let te = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed().as_secs() >= LIMIT_S {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    Some(std::process::Output {
        status,
        stdout: to.join().unwrap(),
        stderr: te.join().unwrap(),
    })
}

#[test]
fn hostile_inputs_are_refused_cleanly() {
    let dir = scratch();
    let all = cases(&dir);
    assert!(all.len() >= 300, "only {} cases", all.len());
    let bin = env!("CARGO_BIN_EXE_tpusim");
    // Run on a few threads: each case is a small process.
    let chunks: Vec<&[Case]> = all.chunks(all.len().div_ceil(4)).collect();
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                s.spawn(move || {
                    let mut bad = Vec::new();
                    for c in chunk.iter() {
                        let Some(out) = run_bounded(bin, &c.args) else {
                            bad.push(format!("{:?}: still running after {LIMIT_S} s (killed)", c.args));
                            continue;
                        };
                        let code = out.status.code().unwrap_or(-1);
                        let err = String::from_utf8_lossy(&out.stderr);
                        let text = format!("{err}{}", String::from_utf8_lossy(&out.stdout));
                        if let Some(left) = c.absent.iter().find(|p| p.exists()) {
                            bad.push(format!("{:?}: left {} behind", c.args, left.display()));
                        }
                        if code != c.code || err.contains("panicked") || !text.contains(&c.says) {
                            bad.push(format!(
                                "{:?}: exit {code}, wanted {} naming {:?}: {}",
                                c.args,
                                c.code,
                                c.says,
                                err.trim()
                            ));
                        }
                    }
                    bad
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    if std::env::var_os("TPUSIM_HOSTILE_KEEP").is_some() {
        let tsv: String = all
            .iter()
            .map(|c| format!("{}\t{}\t{}\n", c.code, c.says, c.args.join("\t")))
            .collect();
        std::fs::write(dir.join("cases.tsv"), tsv).unwrap();
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["run", "--preset", "dlrm-small"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // Success, or ended by SIGPIPE as any filter is.
    assert!(
        out.status.success() || out.status.code().is_none(),
        "{:?}: {err}",
        out.status
    );
}

#[test]
fn fortran_ordered_ids_are_read_as_the_same_array() {
    let dir = scratch().join("fortran");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = file(
        &dir,
        "spec.json",
        br#"{"num_sc_per_device": 4, "local_device_count": 1, "global_device_count": 1, "allow_id_dropping": false, "enable_minibatching": false,
            "tables": [{"name": "t", "vocabulary_size": 100, "embedding_dim": 8, "combiner": "sum"}],
            "features": [{"name": "f", "table": "t", "input_shape": [4, 2]}]}"#,
    );
    let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    // [[1, 2], [3, 4], [5, 6], [7, 8]]: row-major 1..8, column-major 1 3 5 7 2 4 6 8.
    let c = file(
        &dir,
        "c.npz",
        &zip_one(
            "f.npy",
            &npy("<i4", false, "(4, 2)", &i32s(&[1, 2, 3, 4, 5, 6, 7, 8])),
            None,
        ),
    );
    let f = file(
        &dir,
        "f.npz",
        &zip_one(
            "f.npy",
            &npy("<i4", true, "(4, 2)", &i32s(&[1, 3, 5, 7, 2, 4, 6, 8])),
            None,
        ),
    );
    let (c1, a, e1) = common::tpusim(&["preprocess", "--spec", &spec, "--ids", &c, "--json"]);
    let (c2, b, e2) = common::tpusim(&["preprocess", "--spec", &spec, "--ids", &f, "--json"]);
    assert_eq!((c1, c2), (0, 0), "{e1} {e2}");
    assert_eq!(a, b);
}

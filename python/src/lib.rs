//! `tpusim._native`: the Python face of `tpusim-api`. It converts Python values (dicts, paths, numpy
//! arrays) into the library's types and the library's results into dicts and numpy arrays, and turns
//! errors into `tpusim.Error` with the CLI's message. No model code lives here.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};
use serde_json::Value;
use tpusim_api::limits::{IdsSource, LimitsSource};
use tpusim_api::preprocess::{BatchIds, FeatureIds, PreprocessSpec};
use tpusim_api::run::{Pipelining, RunRequest};
use tpusim_api::ApiError;

pyo3::create_exception!(
    tpusim,
    Error,
    PyValueError,
    "A tpusim error: bad input or usage, with the message the tpusim CLI prints."
);
pyo3::create_exception!(
    tpusim,
    LimitExceededError,
    Error,
    "A preprocessing limit is exceeded with allow_id_dropping off (jax-tpu-embedding aborts here; the CLI exits 1)."
);

fn err(e: ApiError) -> PyErr {
    match e {
        ApiError::LimitExceeded(_) => LimitExceededError::new_err(e.message()),
        ApiError::Input(_) => Error::new_err(e.message()),
    }
}

fn bad(msg: impl Into<String>) -> PyErr {
    Error::new_err(msg.into())
}

/// Runs `f`; a panic (a bug) becomes `tpusim.Error` instead of crossing into Python.
fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::new_err(format!(
                "internal error (a bug in tpusim; please report it with the input): {msg}"
            )))
        }
    }
}

/// A JSON value as Python objects (objects keep their key order).
fn to_py(py: Python<'_>, v: &Value) -> PyResult<PyObject> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any().unbind()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any().unbind(),
        Value::Array(a) => {
            let items = a.iter().map(|x| to_py(py, x)).collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any().unbind()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

/// A path given as `str` or `os.PathLike`; None for anything else.
fn as_path(obj: &Bound<'_, PyAny>) -> PyResult<Option<PathBuf>> {
    if obj.is_instance_of::<PyString>() || obj.hasattr("__fspath__")? {
        let s: String = obj.py().import("os")?.call_method1("fspath", (obj,))?.extract()?;
        return Ok(Some(PathBuf::from(s)));
    }
    Ok(None)
}

/// JSON text of a dict (or any JSON-serialisable object); a `str` is taken as JSON text already.
fn json_text(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(s.to_string());
    }
    obj.py()
        .import("json")?
        .call_method1("dumps", (obj,))
        .map_err(|e| bad(format!("not JSON-serialisable: {e}")))?
        .extract()
}

/// A preprocess spec: a dict in the contract's schema, or the path of SPEC.json.
fn spec_arg(obj: &Bound<'_, PyAny>) -> PyResult<(PreprocessSpec, String)> {
    if let Some(p) = as_path(obj)? {
        let spec = tpusim_api::preprocess::read_spec(&p).map_err(err)?;
        return Ok((spec, p.display().to_string()));
    }
    let text = json_text(obj)?;
    Ok((
        tpusim_api::preprocess::parse_spec(&text, "spec").map_err(err)?,
        "spec".into(),
    ))
}

/// An array as numpy sees it (lists and scalars through `numpy.asarray`, arrays unchanged).
fn as_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    obj.py().import("numpy")?.call_method1("asarray", (obj,))
}

fn dtype_of(a: &Bound<'_, PyAny>) -> String {
    a.getattr("dtype")
        .and_then(|d| d.str())
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Ids of an int32 or int64 array, in C order, with its shape; int64 values must fit int32.
fn ids_of(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<(Vec<usize>, Vec<i32>)> {
    let a = as_array(obj)?;
    if let Ok(x) = a.downcast::<PyArrayDyn<i32>>() {
        let r = x.readonly();
        // One copy into the Vec the preprocessing owns; logical (C) order for any strides.
        let data = match r.as_slice() {
            Ok(s) if r.is_c_contiguous() => s.to_vec(),
            _ => r.as_array().iter().copied().collect(),
        };
        return Ok((r.shape().to_vec(), data));
    }
    if let Ok(x) = a.downcast::<PyArrayDyn<i64>>() {
        let r = x.readonly();
        let mut data = Vec::with_capacity(r.len());
        for (pos, &v) in r.as_array().iter().enumerate() {
            data.push(i32::try_from(v).map_err(|_| {
                bad(format!(
                    "ids: array '{name}': id {v} at position {pos} does not fit in int32 (the contract's id type)"
                ))
            })?);
        }
        return Ok((r.shape().to_vec(), data));
    }
    Err(bad(format!(
        "ids: array '{name}' has dtype {}; expected int32 or int64 ids",
        dtype_of(&a)
    )))
}

fn row_splits_of(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let (shape, v): (Vec<usize>, Vec<i64>) = {
        let a = as_array(obj)?;
        if let Ok(x) = a.downcast::<PyArrayDyn<i64>>() {
            let r = x.readonly();
            (r.shape().to_vec(), r.as_array().iter().copied().collect())
        } else if let Ok(x) = a.downcast::<PyArrayDyn<i32>>() {
            let r = x.readonly();
            (r.shape().to_vec(), r.as_array().iter().map(|&v| v as i64).collect())
        } else {
            return Err(bad(format!(
                "ids: array '{name}.row_splits' has dtype {}; expected int64 (or int32)",
                dtype_of(&a)
            )));
        }
    };
    if shape.len() != 1 {
        return Err(bad(format!(
            "ids: array '{name}.row_splits' must be 1-D, got shape {shape:?}"
        )));
    }
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            usize::try_from(x).map_err(|_| {
                bad(format!(
                    "ids: array '{name}.row_splits': entry {i} is {x}, must not be negative"
                ))
            })
        })
        .collect()
}

fn weights_of(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    let a = as_array(obj)?;
    if let Ok(x) = a.downcast::<PyArrayDyn<f32>>() {
        return Ok(x.readonly().as_array().iter().copied().collect());
    }
    if let Ok(x) = a.downcast::<PyArrayDyn<f64>>() {
        // float64 weights are rounded to float32, as numpy's astype(np.float32) would.
        return Ok(x.readonly().as_array().iter().map(|&w| w as f32).collect());
    }
    Err(bad(format!(
        "ids: array '{name}.weights' has dtype {}; expected float32",
        dtype_of(&a)
    )))
}

/// A batch of ids from a mapping in the NPZ layout of the contract (`N` dense [rows, valency],
/// `N.values` + `N.row_splits` ragged, optional `N.weights`), or with a feature's ragged parts
/// nested (`{"N": {"values": ..., "row_splits": ..., "weights": ...}}`). `numpy.load(npz)` works too.
fn batch_of(obj: &Bound<'_, PyAny>) -> PyResult<BatchIds> {
    let py = obj.py();
    let d = py.import("builtins")?.getattr("dict")?.call1((obj,))?;
    let d = d.downcast::<PyDict>()?;
    let mut flat: BTreeMap<String, Bound<'_, PyAny>> = BTreeMap::new();
    for (k, v) in d.iter() {
        let k: String = k
            .extract()
            .map_err(|_| bad(format!("ids: keys must be feature names (str), got {k}")))?;
        if let Ok(inner) = v.downcast::<PyDict>() {
            for (part, a) in inner.iter() {
                let part: String = part.extract()?;
                if !["values", "row_splits", "weights"].contains(&part.as_str()) {
                    return Err(bad(format!(
                        "ids: feature '{k}' has part '{part}'; expected values, row_splits and optionally weights"
                    )));
                }
                flat.insert(format!("{k}.{part}"), a);
            }
        } else {
            flat.insert(k, v);
        }
    }
    let mut batch = BatchIds::new();
    for (name, v) in flat.iter().filter(|(n, _)| !n.contains('.')) {
        let (shape, values) = ids_of(name, v)?;
        if shape.len() != 2 {
            return Err(bad(format!(
                "ids: array '{name}' must be 2-D [rows, valency], got shape {shape:?}"
            )));
        }
        batch.insert(
            name.clone(),
            FeatureIds::dense(values, shape[0], shape[1]).map_err(|e| bad(e.to_string()))?,
        );
    }
    for (key, v) in &flat {
        let Some(name) = key.strip_suffix(".values") else {
            continue;
        };
        let (shape, values) = ids_of(key, v)?;
        if shape.len() != 1 {
            return Err(bad(format!(
                "ids: array '{key}' must be 1-D (ragged values), got shape {shape:?}"
            )));
        }
        let splits = flat
            .get(&format!("{name}.row_splits"))
            .ok_or_else(|| bad(format!("ids: array '{name}.row_splits' is missing")))?;
        batch.insert(
            name.to_string(),
            FeatureIds {
                values,
                row_splits: row_splits_of(name, splits)?,
                weights: None,
            },
        );
    }
    for (key, v) in &flat {
        if let Some(name) = key.strip_suffix(".weights") {
            let w = weights_of(name, v)?;
            let f = batch
                .get_mut(name)
                .ok_or_else(|| bad(format!("ids: array '{key}' has no ids '{name}'")))?;
            f.weights = Some(w);
        } else if let Some(name) = key.strip_suffix(".row_splits") {
            if !flat.contains_key(&format!("{name}.values")) {
                return Err(bad(format!("ids: array '{key}' has no '{name}.values'")));
            }
        } else if key.contains('.') && !key.ends_with(".values") {
            return Err(bad(format!(
                "ids: array '{key}': expected N, N.values, N.row_splits or N.weights"
            )));
        }
    }
    Ok(batch)
}

/// Ids as a path (NPZ) or a mapping of arrays.
fn ids_arg(obj: &Bound<'_, PyAny>) -> PyResult<IdsSource> {
    match as_path(obj)? {
        Some(p) => Ok(IdsSource::Path(p)),
        None => Ok(IdsSource::Batch {
            label: "ids".into(),
            ids: batch_of(obj)?,
        }),
    }
}

/// The facts of one XLA shape: the `tpusim layout --json` object.
#[pyfunction]
#[pyo3(signature = (shape, tpu=None, index=None, offset=None))]
fn layout(
    py: Python<'_>,
    shape: &str,
    tpu: Option<String>,
    index: Option<Vec<i64>>,
    offset: Option<u64>,
) -> PyResult<PyObject> {
    guard(|| {
        if let Some(c) = &tpu {
            tpusim_api::layout::check_chip(c).map_err(err)?;
        }
        let q = tpusim_api::layout::Query { tpu, index, offset };
        to_py(py, &tpusim_api::layout::layout_json(shape, &q).map_err(err)?)
    })
}

/// SparseCore preprocessing of one batch: the `tpusim preprocess --json` object, buffers as numpy arrays.
#[pyfunction]
#[pyo3(signature = (spec, ids, stats_only=false))]
fn preprocess(py: Python<'_>, spec: &Bound<'_, PyAny>, ids: &Bound<'_, PyAny>, stats_only: bool) -> PyResult<PyObject> {
    guard(|| {
        let (spec, _) = spec_arg(spec)?;
        let batch = match ids_arg(ids)? {
            IdsSource::Path(p) => tpusim_api::preprocess::read_ids(&p).map_err(err)?,
            IdsSource::Batch { ids, .. } => ids,
        };
        let out = py
            .allow_threads(|| tpusim_api::preprocess::preprocess(&spec, &batch, stats_only))
            .map_err(err)?;
        let stacks = PyDict::new(py);
        for (name, o) in out.stacks {
            let d = PyDict::new(py);
            let stats = tpusim_api::preprocess::stack_stats_json(&o);
            if !stats_only {
                // The buffers move into numpy arrays without a copy.
                d.set_item("row_pointers", PyArray1::from_vec(py, o.row_pointers))?;
                d.set_item("embedding_ids", PyArray1::from_vec(py, o.embedding_ids))?;
                d.set_item("sample_ids", PyArray1::from_vec(py, o.sample_ids))?;
                d.set_item("gains", PyArray1::from_vec(py, o.gains))?;
            }
            for (k, v) in stats {
                d.set_item(k, to_py(py, &v)?)?;
            }
            stacks.set_item(name, d)?;
        }
        let top = PyDict::new(py);
        top.set_item("stacks", stacks)?;
        Ok(top.into_any().unbind())
    })
}

/// The compile-time verdict of one case: a `tpusim limits compile-check --json` line.
#[pyfunction]
fn compile_check(py: Python<'_>, case: &Bound<'_, PyAny>, chip: &str) -> PyResult<PyObject> {
    guard(|| {
        let text = json_text(case)?;
        let v = tpusim_api::limits::compile_check(&text, chip).map_err(err)?;
        to_py(py, &serde_json::to_value(v).map_err(|e| bad(e.to_string()))?)
    })
}

/// The verdict per stack: the `tpusim limits validate --json` object.
#[pyfunction]
#[pyo3(signature = (spec, chip, limits=None, fdo=None, ids=None))]
fn validate(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    chip: &str,
    limits: Option<&Bound<'_, PyAny>>,
    fdo: Option<&Bound<'_, PyAny>>,
    ids: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    guard(|| {
        let (spec, origin) = spec_arg(spec)?;
        let source = match (limits, fdo) {
            (Some(_), Some(_)) => return Err(bad("give limits or fdo, not both")),
            (Some(l), None) => LimitsSource::File(as_path(l)?.ok_or_else(|| bad("limits: expected a path"))?),
            (None, Some(f)) => LimitsSource::Fdo(as_path(f)?.ok_or_else(|| bad("fdo: expected a directory path"))?),
            (None, None) => LimitsSource::Spec,
        };
        let mut batches = Vec::new();
        if let Some(ids) = ids {
            if ids.is_instance_of::<PyList>() || ids.is_instance_of::<pyo3::types::PyTuple>() {
                for (i, item) in ids.try_iter()?.enumerate() {
                    batches.push(match ids_arg(&item?)? {
                        IdsSource::Batch { ids, .. } => IdsSource::Batch {
                            label: format!("ids[{i}]"),
                            ids,
                        },
                        p => p,
                    });
                }
            } else {
                batches.push(ids_arg(ids)?);
            }
        }
        let chip = chip.to_string();
        let v = py
            .allow_threads(|| tpusim_api::limits::validate(&spec, &origin, &chip, &source, batches))
            .map_err(err)?;
        to_py(py, &v.json)
    })
}

/// The cost of one op on a chip: the `tpusim op --json` object.
#[pyfunction]
fn op(py: Python<'_>, spec: &Bound<'_, PyAny>, chip: &str) -> PyResult<PyObject> {
    guard(|| {
        let text = json_text(spec)?;
        let s = tpusim_api::op::cost_on_preset(&text, chip).map_err(err)?;
        to_py(py, &serde_json::to_value(s).map_err(|e| bad(e.to_string()))?)
    })
}

/// `--set` strings from a dict (values JSON-encoded) or a list of `KEY=VALUE` strings.
fn overrides_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(obj) = obj else { return Ok(Vec::new()) };
    if let Ok(d) = obj.downcast::<PyDict>() {
        let mut v = Vec::new();
        for (k, x) in d.iter() {
            let k: String = k.extract().map_err(|_| bad("overrides: keys must be str"))?;
            v.push(format!("{k}={}", json_text_value(&x)?));
        }
        return Ok(v);
    }
    obj.extract::<Vec<String>>()
        .map_err(|_| bad("overrides: expected a dict {KEY: VALUE} or a list of 'KEY=VALUE' strings"))
}

/// JSON text of a value (strings JSON-quoted, unlike [`json_text`]).
fn json_text_value(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    obj.py()
        .import("json")?
        .call_method1("dumps", (obj,))
        .map_err(|e| bad(format!("not JSON-serialisable: {e}")))?
        .extract()
}

fn opt_path(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<PathBuf>> {
    match obj {
        None => Ok(None),
        Some(o) => Ok(Some(
            as_path(o)?.ok_or_else(|| bad(format!("{what}: expected a path")))?,
        )),
    }
}

/// The cost of an HLO module on a chip: the `tpusim hlo --json` report. `sets` are
/// `chip.FIELD=VALUE` what-if values; `origin` names the module in errors.
#[pyfunction]
#[pyo3(signature = (text, chip, sets=Vec::new(), origin="hlo".to_string()))]
fn hlo(py: Python<'_>, text: String, chip: String, sets: Vec<String>, origin: String) -> PyResult<PyObject> {
    guard(|| {
        let v = py
            .allow_threads(|| tpusim_api::hlo::hlo_json(&text, &origin, &chip, &sets))
            .map_err(err)?;
        to_py(py, &v)
    })
}

/// The library's view of `run`'s and `sensitivity`'s arguments.
#[allow(clippy::too_many_arguments)]
fn run_request(
    workload: Option<&Bound<'_, PyAny>>,
    preset: Option<String>,
    overrides: Option<&Bound<'_, PyAny>>,
    chip: Option<String>,
    chips: Option<u32>,
    batch: Option<u64>,
    steps: Option<u32>,
    pipelining: Option<String>,
) -> PyResult<RunRequest> {
    let pipelining = match pipelining.as_deref() {
        None => None,
        Some("sequential") => Some(Pipelining::Sequential),
        Some("pipelined") => Some(Pipelining::Pipelined),
        Some(p) => return Err(bad(format!("pipelining: '{p}', expected 'sequential' or 'pipelined'"))),
    };
    Ok(RunRequest {
        workload: opt_path(workload, "workload")?,
        preset,
        chip,
        chips,
        batch,
        steps,
        pipelining,
        set: overrides_arg(overrides)?,
    })
}

/// Simulates a workload: the `tpusim run --json` summary.
#[pyfunction]
#[pyo3(signature = (workload=None, preset=None, overrides=None, functional=false, chip=None, chips=None, batch=None, steps=None, pipelining=None))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    workload: Option<&Bound<'_, PyAny>>,
    preset: Option<String>,
    overrides: Option<&Bound<'_, PyAny>>,
    functional: bool,
    chip: Option<String>,
    chips: Option<u32>,
    batch: Option<u64>,
    steps: Option<u32>,
    pipelining: Option<String>,
) -> PyResult<PyObject> {
    guard(|| {
        let req = run_request(workload, preset, overrides, chip, chips, batch, steps, pipelining)?;
        let summary = py
            .allow_threads(|| -> tpusim_api::Result<Value> {
                let w = tpusim_api::run::load_workload(&req)?;
                let opts = tpusim_api::run::run_options(&req, None, functional)?;
                let r = tpusim_api::run::simulate(&w, &opts)?;
                tpusim_api::run::summary_json(&r)
            })
            .map_err(err)?;
        to_py(py, &summary)
    })
}

/// The step time with each assumed constant halved and doubled: the `tpusim run --sensitivity --json` object.
#[pyfunction]
#[pyo3(signature = (workload=None, preset=None, overrides=None, chip=None, chips=None, batch=None, steps=None, pipelining=None))]
#[allow(clippy::too_many_arguments)]
fn sensitivity(
    py: Python<'_>,
    workload: Option<&Bound<'_, PyAny>>,
    preset: Option<String>,
    overrides: Option<&Bound<'_, PyAny>>,
    chip: Option<String>,
    chips: Option<u32>,
    batch: Option<u64>,
    steps: Option<u32>,
    pipelining: Option<String>,
) -> PyResult<PyObject> {
    guard(|| {
        let req = run_request(workload, preset, overrides, chip, chips, batch, steps, pipelining)?;
        let v = py
            .allow_threads(|| -> tpusim_api::Result<Value> {
                let w = tpusim_api::run::load_workload(&req)?;
                let opts = tpusim_api::run::run_options(&req, None, false)?;
                let s = tpusim_api::run::sensitivity(&w, &opts)?;
                Ok(serde_json::to_value(&s).map_err(anyhow::Error::from)?)
            })
            .map_err(err)?;
        to_py(py, &v)
    })
}

/// The chip presets (or one chip with a chip file's overrides): per chip, every field with its value,
/// unit and source.
#[pyfunction]
#[pyo3(signature = (chip=None, chip_file=None))]
fn chips(py: Python<'_>, chip: Option<String>, chip_file: Option<&Bound<'_, PyAny>>) -> PyResult<PyObject> {
    guard(|| {
        let file = opt_path(chip_file, "chip_file")?;
        let chips = tpusim_api::chips::chips(chip.as_deref(), file.as_deref()).map_err(err)?;
        to_py(py, &tpusim_api::chips::fields_json(&chips))
    })
}

/// Kernel selection for a small op graph: the `tpusim select --json` object.
#[pyfunction]
#[pyo3(signature = (graph, chip="v5p".to_string()))]
fn select(py: Python<'_>, graph: &Bound<'_, PyAny>, chip: String) -> PyResult<PyObject> {
    guard(|| {
        let g = if graph.is_instance_of::<PyDict>() {
            tpusim_api::select::parse_graph(&json_text(graph)?, "graph")
        } else {
            let p = as_path(graph)?.ok_or_else(|| bad("graph: expected a dict or the path of GRAPH.json"))?;
            tpusim_api::select::read_graph(&p)
        }
        .map_err(err)?;
        let r = tpusim_api::select::select(g, &chip).map_err(err)?;
        to_py(py, &tpusim_api::select::select_json(&r).map_err(err)?)
    })
}

/// A preset run sequential and pipelined: the `tpusim explain pipelining --json` numbers (no picture).
#[pyfunction]
#[pyo3(signature = (preset="balanced".to_string(), steps=6))]
fn explain_pipelining(py: Python<'_>, preset: String, steps: u32) -> PyResult<PyObject> {
    guard(|| {
        let v = py
            .allow_threads(|| -> tpusim_api::Result<Value> {
                let runs = tpusim_api::explain::pipelining_runs(&preset, steps)?;
                Ok(tpusim_api::explain::pipelining_json(&runs))
            })
            .map_err(err)?;
        to_py(py, &v)
    })
}

/// One batch counted per partition against a spec's limits: the `tpusim explain limits --json` object.
#[pyfunction]
fn explain_limits(py: Python<'_>, spec: &Bound<'_, PyAny>, ids: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    guard(|| {
        let (spec, _) = spec_arg(spec)?;
        let v = match ids_arg(ids)? {
            IdsSource::Path(p) => tpusim_api::explain::limits_json_file(&spec, &p),
            IdsSource::Batch { ids, .. } => tpusim_api::explain::limits_json(&spec, &ids),
        }
        .map_err(err)?;
        to_py(py, &v)
    })
}

fn str_list(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(s.to_string().split(',').map(|x| x.trim().to_string()).collect());
    }
    obj.extract()
        .map_err(|_| bad(format!("{what}: expected a str or a list of str")))
}

/// A sweep plan (JSON text): the workload and the configurations, ready for `sweep_configs`.
#[pyfunction]
#[pyo3(signature = (workload=None, preset=None, chip=None, chips=None, batch=None, limits=None, steps=4, overrides=None, target=None, prices=None))]
#[allow(clippy::too_many_arguments)]
fn sweep_plan(
    workload: Option<&Bound<'_, PyAny>>,
    preset: Option<String>,
    chip: Option<&Bound<'_, PyAny>>,
    chips: Option<&Bound<'_, PyAny>>,
    batch: Option<&Bound<'_, PyAny>>,
    limits: Option<&Bound<'_, PyAny>>,
    steps: u32,
    overrides: Option<&Bound<'_, PyAny>>,
    target: Option<f64>,
    prices: Option<BTreeMap<String, f64>>,
) -> PyResult<String> {
    guard(|| {
        let chip = chip.ok_or_else(|| bad("chip: give the chips to sweep, e.g. ['v5p', 'v6e']"))?;
        let chips = chips.ok_or_else(|| bad("chips: give the chip counts to sweep, e.g. [4, 8]"))?;
        let batch = batch.ok_or_else(|| bad("batch: give the global batches, e.g. [4096, 8192] or '4096..65536x2'"))?;
        let chips: Vec<u32> = match chips.extract::<u32>() {
            Ok(n) => vec![n],
            Err(_) => chips
                .extract()
                .map_err(|_| bad("chips: expected an int or a list of int"))?,
        };
        let batches: Vec<u64> = if let Ok(s) = batch.downcast::<PyString>() {
            tpusim_api::sweep::parse_batches(&s.to_string()).map_err(err)?
        } else if let Ok(n) = batch.extract::<u64>() {
            vec![n]
        } else {
            batch
                .extract()
                .map_err(|_| bad("batch: expected an int, a list of int or 'FROM..TOxFACTOR'"))?
        };
        let req = tpusim_api::sweep::SweepRequest {
            workload: opt_path(workload, "workload")?,
            preset,
            chip: str_list(chip, "chip")?,
            chips,
            batches,
            limits: opt_path(limits, "limits")?,
            steps,
            target,
            prices: prices
                .unwrap_or_default()
                .into_iter()
                .map(|(c, p)| format!("{c}={p}"))
                .collect(),
            set: overrides_arg(overrides)?,
            ..Default::default()
        };
        let plan = tpusim_api::sweep::plan(&req).map_err(err)?;
        serde_json::to_string(&plan).map_err(|e| bad(e.to_string()))
    })
}

fn parse_plan(plan: &str) -> PyResult<tpusim_api::sweep::SweepPlan> {
    serde_json::from_str(plan).map_err(|e| bad(format!("plan: not a sweep plan from tpusim.sweep_plan: {e}")))
}

/// The number of configurations of a plan.
#[pyfunction]
fn sweep_len(plan: &str) -> PyResult<usize> {
    guard(|| Ok(parse_plan(plan)?.configs.len()))
}

/// Simulates configurations `indices` of a plan on `jobs` threads (None: all cores): one dict per
/// configuration, as the rows of `sweep.json`, in the order of `indices`.
#[pyfunction]
#[pyo3(signature = (plan, indices, jobs=None))]
fn sweep_configs(py: Python<'_>, plan: &str, indices: Vec<usize>, jobs: Option<usize>) -> PyResult<PyObject> {
    guard(|| {
        let plan = parse_plan(plan)?;
        let points = py
            .allow_threads(|| {
                let points = tpusim_api::sweep::run_configs(&plan, &indices, jobs, &|| {})?;
                tpusim_api::sweep::points_json(&points)
            })
            .map_err(err)?;
        to_py(py, &points)
    })
}

/// Writes the outputs of `tpusim sweep -o DIR` (sweep.csv, sweep.json and the plots) for points
/// (the dicts `sweep_configs` returns, in plan order); returns the answers the CLI prints.
#[pyfunction]
fn sweep_write(plan: &str, points: &Bound<'_, PyAny>, output: &Bound<'_, PyAny>) -> PyResult<String> {
    guard(|| {
        let plan = parse_plan(plan)?;
        let points: Vec<tpusim_api::sweep::SweepPoint> =
            serde_json::from_str(&json_text_value(points)?).map_err(|e| bad(format!("points: not sweep rows: {e}")))?;
        let dir = as_path(output)?.ok_or_else(|| bad("output: expected a directory path"))?;
        tpusim_api::sweep::write_plan_outputs(&dir, &plan, &points).map_err(err)?;
        Ok(tpusim_api::sweep::summary_text(&plan, &points))
    })
}

/// The answers of a sweep (what `tpusim sweep --json` prints under "answers"): per configuration the
/// best throughput that fits, the cheapest configuration reaching the plan's target with its limits,
/// and the prices with currency and source.
#[pyfunction]
fn sweep_answers(py: Python<'_>, plan: &str, points: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    guard(|| {
        let plan = parse_plan(plan)?;
        let points: Vec<tpusim_api::sweep::SweepPoint> =
            serde_json::from_str(&json_text_value(points)?).map_err(|e| bad(format!("points: not sweep rows: {e}")))?;
        let answers = serde_json::to_value(tpusim_api::sweep::answers(&plan, &points)).map_err(|e| bad(e.to_string()))?;
        to_py(py, &answers)
    })
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("LimitExceededError", m.py().get_type::<LimitExceededError>())?;
    m.add_function(wrap_pyfunction!(layout, m)?)?;
    m.add_function(wrap_pyfunction!(preprocess, m)?)?;
    m.add_function(wrap_pyfunction!(compile_check, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(op, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(hlo, m)?)?;
    m.add_function(wrap_pyfunction!(sensitivity, m)?)?;
    m.add_function(wrap_pyfunction!(chips, m)?)?;
    m.add_function(wrap_pyfunction!(select, m)?)?;
    m.add_function(wrap_pyfunction!(explain_pipelining, m)?)?;
    m.add_function(wrap_pyfunction!(explain_limits, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_plan, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_len, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_configs, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_write, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_answers, m)?)?;
    Ok(())
}

#!/usr/bin/env python3
"""Writes sim-tpu/chips/*.json, the chip presets, from the facts in shared/reference/chips.md.
Each field is {"value": ..., "source": ...}, the source a typed object as sim_tpu::source::Source reads
it: {"datasheet": ...}, {"compiler": ...}, {"calibrated": {"on": ..., "chip": ...}} or {"assumed": ...}.
Below, sources are written as short tags, turned into those objects by `typed`: O official documents,
C Google code/docs, B the JAX scaling book (all datasheets), I derived from a document (a datasheet,
"derived: ..."), X read off the XLA TPU compiler, "assumed: ..." where no public figure exists
(overridable with --chip-file).
Run: python3 tools/gen_chip_presets.py
"""
import json

GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10


# What a bare tag says when it has no text of its own.
BARE = {
    "O": "official documentation",
    "C": "JAX / Pallas code and docs",
    "B": "How to Scale Your Model (the scaling book)",
    "O/B": "official documentation and the scaling book",
    "O/C": "official documentation and JAX code",
    "preset": "the preset's name",
}
DATASHEET_TAGS = ("O", "C", "B", "O/B", "O/C")


def typed(source):
    """The typed source object of a tagged source string."""
    if source in BARE:
        return {"datasheet": BARE[source]}
    tag, sep, text = source.partition(": ")
    if not sep:
        raise ValueError(f"source without a tag: {source!r}")
    if tag == "assumed":
        return {"assumed": text}
    if tag == "X":
        return {"compiler": text}
    if tag == "I":
        return {"datasheet": "derived: " + text}
    if tag in DATASHEET_TAGS:
        return {"datasheet": text}
    raise ValueError(f"unknown source tag {tag!r} in {source!r}")


def f(value, source):
    return {"value": value, "source": typed(source)}


CM = "X: read off the XLA TPU compiler's cost model (reference/chips.md, ops.jsonl)"
SC_CLOCK = "assumed: SparseCore clock is not public; taken equal to the TensorCore clock"
SCRATCH = "X: 'scratchpad allocation size is N' in the compiler's Valid-window errors (testdata/limits/window_probes.jsonl)"
SC_HBM = "assumed: SparseCore share of HBM bandwidth is not public; SparseCores can use all of it when TensorCores are idle"

chips = {
    "v4": dict(
        tensorcores_per_chip=f(2, "O: TPU v4 paper (two TensorCores, megacore)"),
        megacore=f(True, "O: TPU v4 paper"),
        mxus_per_tensorcore=f(4, "O: TPU v4 paper"),
        mxu_dim=f(128, "O: TPU v4 paper (128x128)"),
        tc_clock_mhz=f(1050, "O: TPU v4 paper (1050 MHz)"),
        vpu_lanes=f(128, "C: 8x128 vregs (Pallas TPU docs)"),
        vpu_sublanes=f(8, "C: 8x128 vregs (Pallas TPU docs)"),
        vpu_alus_per_lane=f(2, "O: TPU v4 paper (2 ALUs per sublane-lane)"),
        vector_registers=f(32, "B: scaling book TPU chapter"),
        vmem_bytes_per_tc=f(16 * MiB, "O: TPU v4 paper (16 MiB VMEM)"),
        smem_bytes_per_tc=f(1 * MiB, "C: 1 MiB SMEM per core (reference/chips.md)"),
        cmem_bytes=f(128 * MiB, "O: TPU v4 paper (128 MiB CMEM)"),
        hbm_bytes=f(32 * GiB, "O: Cloud TPU docs (32 GiB)"),
        hbm_bytes_per_s=f(1_200_000_000_000, "O: Cloud TPU docs (1200 GB/s)"),
        ici_links=f(6, "O: TPU v4 paper (6 links, 3D torus)"),
        ici_topology=f("3D torus", "O: TPU v4 paper"),
        ici_bytes_per_s_per_link=f(45_000_000_000, "O/B: 45 GB/s one way per link"),
        host_link_bytes_per_s=f(16_000_000_000, "B: PCIe Gen3 x16, 16 GB/s"),
        peak_bf16_flops=f(275_000_000_000_000, "O: Cloud TPU docs (275 TFLOP/s)"),
        peak_int8_ops=f(275_000_000_000_000, "O: Cloud TPU docs"),
        sparsecores_per_chip=f(4, "O: TPU v4 paper"),
        sc_tiles_per_sc=f(16, "O: TPU v4 paper"),
        sc_simd_lanes_f32=f(8, "O: TPU v4 paper"),
        sc_simd_lanes_bf16=f(8, "assumed: no bf16 packing documented for v4 SparseCores"),
        sc_tilespmem_bytes_per_tile=f(160 * KiB, "I: 2.5 MiB Spmem per SC over 16 tiles (TPU v4 paper)"),
        sc_tilespmem_bytes_available=f(160 * KiB - 32, "assumed: like v5p, 32 B reserved"),
        sc_tilespmem_scratchpad_bytes=f(160 * KiB, "assumed: like v5p, available + 32 B"),
        sc_spmem_bytes_per_sc=f(2560 * KiB, "O: TPU v4 paper (2.5 MiB per SparseCore)"),
        sc_dma_granule_bytes=f(32, "C: jax tpu_info SparseCoreInfo"),
        sc_spmem_fixed_overhead_bytes=f(1024, "assumed: not observed; as v5p"),
        sc_clock_mhz=f(1050, SC_CLOCK),
        sc_hbm_share=f(1.0, SC_HBM),
        model_device_tensorcores=f(1, CM + ": one device is one TensorCore"),
        model_peak_flops_per_cycle=f(131072, CM),
        model_clock_mhz=f(1045, CM + ": implied clock 1.045 GHz"),
        model_hbm_bytes_per_s=f(491_000_000_000, CM),
    ),
    "v5e": dict(
        tensorcores_per_chip=f(1, "O: Cloud TPU docs"),
        megacore=f(False, "O: Cloud TPU docs"),
        mxus_per_tensorcore=f(4, "O: Cloud TPU docs"),
        mxu_dim=f(128, "O: Cloud TPU docs"),
        tc_clock_mhz=f(1500, "B: scaling book (1.5 GHz)"),
        vpu_lanes=f(128, "C: Pallas TPU docs"),
        vpu_sublanes=f(8, "C: Pallas TPU docs"),
        vpu_alus_per_lane=f(4, "assumed: not public; as v5p"),
        vector_registers=f(64, "assumed: not public; as v5p"),
        vmem_bytes_per_tc=f(128 * MiB, "C: jax tpu_info"),
        smem_bytes_per_tc=f(1 * MiB, "C: reference/chips.md"),
        cmem_bytes=f(0, "O: no CMEM"),
        hbm_bytes=f(16_000_000_000, "O: Cloud TPU docs (16 GB)"),
        hbm_bytes_per_s=f(819_000_000_000, "O: Cloud TPU docs (819 GB/s)"),
        ici_links=f(4, "B: 4 ports, 2D torus"),
        ici_topology=f("2D torus", "B"),
        ici_bytes_per_s_per_link=f(45_000_000_000, "B: 45 GB/s per link"),
        host_link_bytes_per_s=f(16_000_000_000, "B: ~16 GB/s"),
        peak_bf16_flops=f(197_000_000_000_000, "O: Cloud TPU docs"),
        peak_int8_ops=f(393_000_000_000_000, "O: Cloud TPU docs"),
        sparsecores_per_chip=f(0, "O: v5e has no SparseCores"),
        sc_tiles_per_sc=f(0, "O"),
        sc_simd_lanes_f32=f(0, "O"),
        sc_simd_lanes_bf16=f(0, "O"),
        sc_tilespmem_bytes_per_tile=f(0, "O"),
        sc_tilespmem_bytes_available=f(0, "O"),
        sc_tilespmem_scratchpad_bytes=f(0, "O"),
        sc_spmem_bytes_per_sc=f(0, "O"),
        sc_dma_granule_bytes=f(32, "C"),
        sc_spmem_fixed_overhead_bytes=f(0, "O: no SparseCores"),
        sc_clock_mhz=f(1500, SC_CLOCK),
        sc_hbm_share=f(0.0, "O: no SparseCores"),
        model_device_tensorcores=f(1, CM),
        model_peak_flops_per_cycle=f(131072, CM),
        model_clock_mhz=f(1503, CM),
        model_hbm_bytes_per_s=f(738_000_000_000, CM),
    ),
    "v5p": dict(
        tensorcores_per_chip=f(2, "O: Cloud TPU docs (megacore)"),
        megacore=f(True, "O: Cloud TPU docs"),
        mxus_per_tensorcore=f(4, "O/B"),
        mxu_dim=f(128, "O/B"),
        tc_clock_mhz=f(1750, "B: scaling book (~1.75 GHz)"),
        vpu_lanes=f(128, "C"),
        vpu_sublanes=f(8, "C"),
        vpu_alus_per_lane=f(4, "B: 4 per (sublane, lane)"),
        vector_registers=f(64, "B: 64 per core"),
        vmem_bytes_per_tc=f(64 * MiB, "C: jax tpu_info"),
        smem_bytes_per_tc=f(1 * MiB, "C"),
        cmem_bytes=f(0, "O: no CMEM"),
        hbm_bytes=f(95 * GiB, "O: Cloud TPU docs (95 GiB)"),
        hbm_bytes_per_s=f(2_765_000_000_000, "O: Cloud TPU docs (2765 GB/s)"),
        ici_links=f(6, "B: 3D torus"),
        ici_topology=f("3D torus", "B"),
        ici_bytes_per_s_per_link=f(90_000_000_000, "B: 90 GB/s per link"),
        host_link_bytes_per_s=f(16_000_000_000, "B: ~16 GB/s"),
        peak_bf16_flops=f(459_000_000_000_000, "O: Cloud TPU docs"),
        peak_int8_ops=f(918_000_000_000_000, "O: Cloud TPU docs"),
        sparsecores_per_chip=f(4, "O/C"),
        sc_tiles_per_sc=f(16, "C: jax tpu_info SparseCoreInfo"),
        sc_simd_lanes_f32=f(8, "C: jax tpu_info"),
        sc_simd_lanes_bf16=f(16, "assumed: bf16 packs two per 32-bit lane"),
        sc_tilespmem_bytes_per_tile=f(512 * KiB, "C: jax tpu_info (512 KiB)"),
        sc_tilespmem_bytes_available=f(524128, "X: read off compiler errors (sparsecore.jsonl)"),
        sc_tilespmem_scratchpad_bytes=f(524160, SCRATCH),
        sc_spmem_bytes_per_sc=f(524288, "C: XLA SparseCore docs, E3001 total_spmem_size_bytes"),
        sc_dma_granule_bytes=f(32, "C: jax tpu_info"),
        sc_spmem_fixed_overhead_bytes=f(1024, "X: E3001 reports (fixed = 36 x max_unique + 1024)"),
        sc_clock_mhz=f(1750, SC_CLOCK),
        sc_hbm_share=f(1.0, SC_HBM),
        model_device_tensorcores=f(2, CM + ": one device is a megacore pair"),
        model_peak_flops_per_cycle=f(262144, CM),
        model_clock_mhz=f(1503, CM),
        model_hbm_bytes_per_s=f(2_350_000_000_000, CM),
    ),
    "v6e": dict(
        tensorcores_per_chip=f(1, "O: Cloud TPU docs"),
        megacore=f(False, "O"),
        mxus_per_tensorcore=f(2, "O/C"),
        mxu_dim=f(256, "O/C: 256x256"),
        tc_clock_mhz=f(1751, "assumed: published figures conflict; the compiler's cost model implies 1.751 GHz"),
        vpu_lanes=f(128, "C"),
        vpu_sublanes=f(8, "C"),
        vpu_alus_per_lane=f(4, "assumed: not public; as v5p"),
        vector_registers=f(64, "assumed: not public; as v5p"),
        vmem_bytes_per_tc=f(128 * MiB, "C: jax tpu_info"),
        smem_bytes_per_tc=f(1 * MiB, "C"),
        cmem_bytes=f(0, "O"),
        hbm_bytes=f(32_000_000_000, "O: Cloud TPU docs (32 GB)"),
        hbm_bytes_per_s=f(1_638_000_000_000, "O: Cloud TPU docs (1638 GB/s)"),
        ici_links=f(4, "B: 2D torus"),
        ici_topology=f("2D torus", "B"),
        ici_bytes_per_s_per_link=f(90_000_000_000, "B: 90 GB/s per link"),
        host_link_bytes_per_s=f(32_000_000_000, "B: PCIe Gen5 32 GB/s"),
        peak_bf16_flops=f(918_000_000_000_000, "O: Cloud TPU docs"),
        peak_int8_ops=f(1_836_000_000_000_000, "O: Cloud TPU docs"),
        sparsecores_per_chip=f(2, "O: Cloud TPU docs"),
        sc_tiles_per_sc=f(16, "C: jax tpu_info"),
        sc_simd_lanes_f32=f(8, "O/C"),
        sc_simd_lanes_bf16=f(16, "O: 16 bf16 lanes"),
        sc_tilespmem_bytes_per_tile=f(256 * KiB, "C: jax tpu_info (256 KiB)"),
        sc_tilespmem_bytes_available=f(262112, "X: read off compiler errors (sparsecore.jsonl)"),
        sc_tilespmem_scratchpad_bytes=f(262144, SCRATCH),
        sc_spmem_bytes_per_sc=f(524288, "C: XLA SparseCore docs, E3001 total_spmem_size_bytes"),
        sc_dma_granule_bytes=f(32, "C"),
        sc_spmem_fixed_overhead_bytes=f(1024, "X: E3001 reports (fixed = 36 x max_unique + 1024)"),
        sc_clock_mhz=f(1751, SC_CLOCK),
        sc_hbm_share=f(1.0, SC_HBM),
        model_device_tensorcores=f(1, CM),
        model_peak_flops_per_cycle=f(524288, CM),
        model_clock_mhz=f(1751, CM),
        model_hbm_bytes_per_s=f(1_638_000_000_000, CM),
    ),
    "tpu7x": dict(
        tensorcores_per_chip=f(2, "O: two TensorCores, each its own device"),
        megacore=f(False, "O: no megacore"),
        mxus_per_tensorcore=f(2, "C"),
        mxu_dim=f(256, "C: 256-wide"),
        tc_clock_mhz=f(1900, "assumed: published figures conflict; the compiler's cost model implies 1.900 GHz"),
        vpu_lanes=f(128, "C"),
        vpu_sublanes=f(8, "C"),
        vpu_alus_per_lane=f(4, "assumed: not public; as v5p"),
        vector_registers=f(64, "assumed: not public; as v5p"),
        vmem_bytes_per_tc=f(64 * MiB, "C: jax tpu_info"),
        smem_bytes_per_tc=f(1 * MiB, "C"),
        cmem_bytes=f(0, "O"),
        hbm_bytes=f(192 * GiB, "O: Ironwood launch (192 GiB)"),
        hbm_bytes_per_s=f(7_370_000_000_000, "O: Ironwood launch (7.37 TB/s)"),
        ici_links=f(6, "B: 3D torus"),
        ici_topology=f("3D torus", "B"),
        ici_bytes_per_s_per_link=f(90_000_000_000, "B: 90 GB/s per link"),
        host_link_bytes_per_s=f(32_000_000_000, "assumed: not public; PCIe Gen5 x16 as v6e"),
        peak_bf16_flops=f(2_307_000_000_000_000, "O: Ironwood launch"),
        peak_int8_ops=f(4_614_000_000_000_000, "O: fp8 rate (Ironwood launch)"),
        sparsecores_per_chip=f(4, "O/C: 4 physical, 2 per TensorCore device"),
        sc_tiles_per_sc=f(16, "C: jax tpu_info"),
        sc_simd_lanes_f32=f(16, "C: jax tpu_info"),
        sc_simd_lanes_bf16=f(32, "C"),
        sc_tilespmem_bytes_per_tile=f(512 * KiB, "C: jax tpu_info (512 KiB)"),
        sc_tilespmem_bytes_available=f(524032, "X: read off compiler errors (sparsecore.jsonl)"),
        sc_tilespmem_scratchpad_bytes=f(524032, SCRATCH),
        sc_spmem_bytes_per_sc=f(524288, "C: XLA SparseCore docs, E3001 total_spmem_size_bytes"),
        sc_dma_granule_bytes=f(32, "C"),
        sc_spmem_fixed_overhead_bytes=f(15872, "X: E3001 reports (fixed = 36 x max_unique + 15872)"),
        sc_clock_mhz=f(1900, SC_CLOCK),
        sc_hbm_share=f(1.0, SC_HBM),
        model_device_tensorcores=f(1, CM + ": one device is one TensorCore"),
        model_peak_flops_per_cycle=f(524288, CM),
        model_clock_mhz=f(1900, CM),
        model_hbm_bytes_per_s=f(3_686_000_000_000, CM),
    ),
}
for name, fields in chips.items():
    with open(f"sim-tpu/chips/{name}.json", "w") as out:
        json.dump({"name": f(name, "preset"), **fields}, out, indent=1)
        out.write("\n")
print("wrote", ", ".join(chips))

//! Step parameters as a chip preset loads them (outside `params`' unit tests, which would otherwise
//! import `chips` while `chips` imports `params`).

use sim_tpu::chips::Chip;

#[test]
fn get_and_with_round_trip() {
    let p = Chip::preset("v4").unwrap().params;
    assert_eq!(p.get("ici_hop_latency_ns"), Some(1000));
    let q = p.with("ici_hop_latency_ns", 500).unwrap();
    assert_eq!(q.ici_hop_latency_ns, 500);
    assert!(p.with("nope", 1).is_none());
    assert!((p.sc_tile_dma_bytes_per_cycle() - 8.73).abs() < 1e-9);
}

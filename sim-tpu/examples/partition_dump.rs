fn main() {
    let a: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&a[1]).unwrap();
    let m = sim_tpu::hlo::HloModule::parse(&text).unwrap();
    let p = sim_tpu::hlo::partition::partition(&m, a[2].parse().unwrap(), None, &text).unwrap();
    println!("{}", p.module);
    for w in p.info.warnings {
        eprintln!("W {w}");
    }
}

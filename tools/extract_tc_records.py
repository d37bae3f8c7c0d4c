"""Copies the compact fields of reference/tpu-compiler/ops.jsonl the TensorCore calibration needs into
testdata/ops/tc_records.jsonl.gz. Run: python3 tools/extract_tc_records.py [path/to/ops.jsonl]"""
import gzip, json, sys
src = sys.argv[1] if len(sys.argv) > 1 else '/work/shared/reference/tpu-compiler/ops.jsonl'
out = gzip.open('testdata/ops/tc_records.jsonl.gz', 'wt', compresslevel=9)
n = 0
for line in open(src):
    r = json.loads(line)
    rec = {
        'id': r['id'], 'chip': r['chip'].split(':')[0], 'op': r['op'], 'params': r['params'],
        'total_estimated_cycles': r['total_estimated_cycles'],
        'entry_params': r['entry_params'], 'entry_result': r['entry_result'],
        'kernels': [{'opcode': i['opcode'], 'fusion_kind': i.get('fusion_kind'), 'estimated_cycles': i['estimated_cycles'],
                     'iteration_bounds': (i.get('window_config') or {}).get('iteration_bounds')}
                    for i in r['instructions'] if 'estimated_cycles' in i],
        'flops': r['cost_analysis'].get('flops'),
        'argument_bytes': r['memory_analysis']['argument_size_in_bytes'],
        'output_bytes': r['memory_analysis']['output_size_in_bytes'],
    }
    out.write(json.dumps(rec, separators=(',', ':')) + '\n')
    n += 1
out.close()
print(n, 'records')

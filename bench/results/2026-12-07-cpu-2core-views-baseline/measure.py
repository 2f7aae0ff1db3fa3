"""The views baseline on this machine: run_baseline (batch 64, 2 workers, 1 warm-up + 3 epochs) and the per-stage
profile of one worker over 200 photos."""
import json, os, random, subprocess, sys
from pathlib import Path
from dataio.bench.views_baseline import run_baseline
from dataio.bench.views_profile import profile_stages

folder = Path(sys.argv[1])
files = sorted(folder.glob("*/*.JPEG"))
sizes = [f.stat().st_size for f in files]
out = {"files": len(files), "mean_kb": sum(sizes) / len(sizes) / 1000, "load_before": os.getloadavg()}
out["run"] = run_baseline(files, batch_size=64, workers=2, epochs=3, warmup=1, seed=0)
out["load_after_run"] = os.getloadavg()
out["profile"] = profile_stages(random.Random(0).sample(files, 200), batch_size=64, seed=0)
out["load_after_profile"] = os.getloadavg()
print(json.dumps(out, indent=1))

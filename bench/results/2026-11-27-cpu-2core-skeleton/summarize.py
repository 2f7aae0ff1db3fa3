import json, statistics, glob, re
from pathlib import Path
rows = {}
for side in ("before", "after"):
    img = {"train": [], "eval": []}
    txt = {}
    for f in sorted(glob.glob(f"log-img-{side}-*.txt")):  # the loader table's CPU us/img column
        for line in Path(f).read_text().splitlines():
            m = re.match(r"\(d(, eval)?\) dataio\.ImageLoader.*?\s+[\d,]+\s+[\d,]+\s+-\s+([\d,]+)\s", line)
            if m:
                img["eval" if m.group(1) else "train"].append(float(m.group(2).replace(",", "")))
    for f in sorted(glob.glob(f"log-txt-{side}-*.txt")):
        text = Path(f).read_text()
        for m in re.finditer(r"^([\d,]+)\s+\d+\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)$", text, re.M):
            txt.setdefault(m.group(1), []).append(int(m.group(2).replace(",", "")))
        m = re.search(r"5-source mixture.*?: ([\d,]+) against ([\d,]+)", text)
        if m: txt.setdefault("mixture", []).append(int(m.group(1).replace(",", "")))
        for mode in ("fixed", "bucket", "budget", "pack"):
            m = re.search(rf"^dataio {mode}\s+[\d.]+%\s+([\d,]+)", text, re.M)
            if m: txt.setdefault(mode, []).append(int(m.group(1).replace(",", "")))
    rows[side] = (img, txt)
b, a = rows["before"], rows["after"]
print("images CPU us/image (median of rounds; lower is better)")
for k in ("train", "eval"):
    mb, ma = statistics.median(b[0][k]), statistics.median(a[0][k])
    print(f"  {k:6} before {mb:7.1f} {b[0][k]}  after {ma:7.1f} {a[0][k]}  after/before {ma/mb:.3f}")
print("text tokens per CPU second (TextLoader budget rows) and useful tok/s per mode (higher is better)")
for k in b[1]:
    mb, ma = statistics.median(b[1][k]), statistics.median(a[1].get(k, [0]))
    print(f"  {k:10} before {mb/1e6:8.1f}M  after {ma/1e6:8.1f}M  after/before {ma/mb:.3f}   ({len(b[1][k])}/{len(a[1].get(k, []))} rounds)")

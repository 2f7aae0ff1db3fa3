"""The remote rows of `dataio bench images` on a moto S3 endpoint on 127.0.0.1 (a loopback figure)."""
import os, sys
from pathlib import Path
os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_EC2_METADATA_DISABLED="true",
                  AWS_DEFAULT_REGION="us-east-1")
import logging; logging.getLogger("werkzeug").setLevel(logging.ERROR)
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False); server.start()
host, port = server.get_host_and_port()
os.environ["AWS_ENDPOINT_URL"] = f"http://{host}:{port}"
from dataio.cli import main
work = Path(sys.argv[1]); out = Path(sys.argv[2])
if not (work / "src").exists():
    main(["synth", str(work / "src"), "--classes", "10", "--per-class", "50"])
import s3fs
fs = s3fs.S3FileSystem(); fs.mkdir("bench")
rc = main(["convert", "images", str(work / "src"), "s3://bench/shards", "--staging", str(work / "staging"),
           "--shard-size", "32MB", "--no-progress"])
assert rc == 0
rc = main(["bench", "images", str(work / "src"), "--shards", "s3://bench/shards", "--out", str(out),
           "--loaders", "dataio", "--epochs", "3", "--warmup", "1", "--batch-size", "64", "--workers", "2"])
server.stop()
sys.exit(rc)

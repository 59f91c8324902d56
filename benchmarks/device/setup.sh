# Sourced by run.sh at the start of every device call: site-packages, datapipe, shared data under
# /tmp/shared/data. Carry folders (git-ignored, see README.md here): .bench-device (always),
# .bench-device-report (report and dashboard packages), .bench-device-warc (realpages-1171 packed).
echo "== $(date -u +%FT%TZ) host: $(nproc) cores, $(uptime)"
unz() { if command -v zstd >/dev/null; then zstd -dc --long=27 "$1"; else python3 -c "import sys,pyarrow as pa; s=pa.CompressedInputStream(pa.OSFile(sys.argv[1]),'zstd'); o=sys.stdout.buffer
while (b:=s.read(1<<22)): o.write(b)" "$1"; fi; }
D=.bench-device
mkdir -p /tmp/site /tmp/shared/data/blocklists /tmp/shared/data/warc
for t in $D/site_p1.tar.zst $D/site_sk.tar.zst .bench-device-report/site_report.tar.zst; do [ -f $t ] && { unz $t | tar xf - -C /tmp/site || exit 1; }; done
cp -r $D/data/* /tmp/shared/data/
mkdir -p /tmp/ut1x && { unz $D/ut1s.tar.zst | tar xf - -C /tmp/ut1x; } && (cd /tmp/ut1x && mv ut1_urls urls && mv ut1_domains_sorted domains && tar cf - urls domains | gzip -1 > /tmp/shared/data/blocklists/ut1_adult_url_filterblacklistsv0_3_0.tar.gz) || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 DATAPIPE_SHARED_DATA=/tmp/shared/data DATAPIPE_MODELS=$PWD/models
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/tmp/pipe.log 2>&1 || { echo "editable install failed:"; tail -3 /tmp/pipe.log; exit 1; }
command -v datapipe || ls "$(dirname "$(command -v python3)")"/datapipe || exit 1
python3 -c "
import importlib
for m in ['numpy','pyarrow','numba','scipy','sklearn','joblib','fsspec','dask','distributed','pydantic','resiliparse','fastwarc','fasttext','phonenumbers','ahocorasick','profanity_check','xxhash','regex','tiktoken','duckdb','bokeh','rich','yaml','zstandard','matplotlib','datapipe']:
    try: x=importlib.import_module(m); print(m, getattr(x,'__version__','?'), getattr(x,'__file__','')[:60])
    except Exception as e: print(m, 'IMPORT FAILED', type(e).__name__, e)
" 2>&1
echo "== setup done $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
# Seconds left before $END (the call's own deadline); realpages-1171 rebuilt from its pack, once per machine.
left() { echo $(( END - $(date +%s) )); }
realpages() {
  [ -f /tmp/shared/data/warc/realpages-1171.warc.gz ] || \
    python3 benchmarks/device/warcpack.py unpack .bench-device-warc/realpages.pack /tmp/shared/data/warc/realpages-1171.warc.gz
}

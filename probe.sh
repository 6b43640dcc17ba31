export PYTHONPATH=$PWD:$PWD/tools
python3 tools/sdd_time_split.py --layout random 2>&1 | tee $OUT/sdd_split_loads.txt
python3 tools/sdd_time_split.py --layout ba --cases 128:0.1,128:0.25 2>&1 | tee -a $OUT/sdd_split_loads.txt
python3 tools/dsd_time_split.py --layout random --cases 128:0.05,128:0.1,128:0.25,128:0.5,64:0.1,64:0.25 --ops fwd 2>&1 | tee $OUT/dsd_split_loads.txt

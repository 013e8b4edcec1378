bash scripts/device_unpack.sh; export LD_LIBRARY_PATH=$PWD/.carry/lib
mkdir -p .carry/old && python3 -c "import tarfile; tarfile.open('.carry/old.tar.xz').extractall('.carry/old')"
.carry/bin/bertrt_tests --gtest_filter='CudaAttention*:CudaParity*' > $OUT/t.txt 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $OUT/t.txt | head -5
python3 scripts/make_random_model.py --preset bert-large --head seq-cls --num-labels 2 --dtype f16 -o /tmp/large >/dev/null
MODEL=/tmp/large REPEATS=3 ITERATIONS=10 bash scripts/device_ab.sh a=.carry/old/bertrt b=.carry/bin/bertrt -- "large:--batch-size 256 --seq-len 384 --gelu tanh" 2>&1 | tee $OUT/ab_large.txt
REPEATS=3 bash scripts/device_ab.sh a=.carry/old/bertrt b=.carry/bin/bertrt -- "b8:--batch-size 8 --seq-len 128 --gelu tanh" "b128:--batch-size 128 --seq-len 128 --gelu tanh" "ragged:--batch-size 32 --lengths 16:128 --gelu tanh" 2>&1 | tee $OUT/ab_base.txt

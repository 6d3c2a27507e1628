# The scaling figure (scripts/bench-scale.sh): wall time and peak memory of one simulated
# iteration against the GPU count. Arguments (data, never script text):
#   gnuplot -c scripts/scaling.gp SCALING.csv ASTRA.csv OUT.png
data = ARG1
astra = ARG2
set terminal pngcairo size 1600,640 font "Sans,13" linewidth 2
set output ARG3
set datafile separator ","
set logscale xy
set grid xtics ytics mxtics mytics lc rgb "#dddddd" lw 0.5
set xrange [40:200000]
set xtics ("64" 64, "256" 256, "1K" 1024, "4K" 4096, "16K" 16384, "64K" 65536, "128K" 131072)
set xlabel "GPUs simulated (weak scaling: the same work per GPU)"
sel(l, m, c) = (strcol(1) eq l && strcol(2) eq m) ? column(c) : NaN
set multiplot layout 1,2 title "madmax: one training iteration, one core, loading included" font "Sans,15"
# rows are sorted by layout, mode, GPUs (bench-scale.sh): each series is contiguous, so the
# other series' rows (NaN here) never fall between two of its points
set ylabel "wall time (s)"
set format y "10^{%T}"
set yrange [1e-4:1e4]
unset key
plot data skip 1 using (sel("tp-fsdp","per-device",3)):4 with linespoints lt 1 pt 7 ps 1.2, \
     data skip 1 using (sel("405b","per-device",3)):4 with linespoints lt 2 pt 5 ps 1.2, \
     data skip 1 using (sel("tp-fsdp","symmetric",3)):4 with linespoints lt 1 dt 2 pt 6 ps 1.2, \
     data skip 1 using (sel("405b","symmetric",3)):4 with linespoints lt 2 dt 2 pt 4 ps 1.2, \
     astra skip 5 using 1:2 with linespoints lc rgb "black" dt 3 pt 9 ps 1.5
set ylabel "peak memory (MB)"
set format y "10^{%T}"
set yrange [1:1e7]
set key top left Left reverse spacing 1.1 box opaque
plot data skip 1 using (sel("tp-fsdp","per-device",3)):5 with linespoints lt 1 pt 7 ps 1.2 title "--per-device, LLaMA-2-70B TP8 x FSDP (A100)", \
     data skip 1 using (sel("405b","per-device",3)):5 with linespoints lt 2 pt 5 ps 1.2 title "--per-device, Llama-3.1-405B TP8 x PP16 x DP (H100)", \
     data skip 1 using (sel("tp-fsdp","symmetric",3)):5 with linespoints lt 1 dt 2 pt 6 ps 1.2 title "symmetric, LLaMA-2-70B", \
     data skip 1 using (sel("405b","symmetric",3)):5 with linespoints lt 2 dt 2 pt 4 ps 1.2 title "symmetric, Llama-3.1-405B", \
     astra skip 5 using 1:3 with linespoints lc rgb "black" dt 3 pt 9 ps 1.5 title "ASTRA-sim 2.0 analytical, simulation only"
unset multiplot

# The largest relative RMS error per tensor over the GPU tests' GDN cases, on one line:
#   awk -f tools/dev/max_errors.awk test_gpu.log   (lines "... <tensor> relative RMS <value> ...")
/relative RMS/ {
  for (i = 1; i <= NF; i++)
    if ($i == "RMS" && $(i + 1) + 0 > m[$4]) m[$4] = $(i + 1) + 0
}
END {
  for (k in m) printf "%s %.2e  ", k, m[k]
  print ""
}

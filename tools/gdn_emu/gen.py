# <<<grid, block, smem, stream>>>(args) -> emu::launch(kernel, grid, block, smem, stream, args) for the CPU emulation.
import re, sys, os
src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
s = re.sub(r'([\w:]+(?:<[^<>;()]*>)?)<<<(.*?)>>>\(', r'emu::launch(\1, \2, ', s, flags=re.S)
open(dst, 'w').write('#line 1 "%s"\n' % src + s)

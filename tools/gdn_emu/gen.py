# For the CPU emulation: <<<grid, block, smem, stream>>>(args) -> emu::launch(kernel, grid, block, smem,
# stream, args), and `extern __shared__ T name[];` (the dynamic shared memory) -> a T* to the emulated CTA's.
import re, sys, os
src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
s = re.sub(r'([\w:]+(?:<[^<>;()]*>)?)<<<(.*?)>>>\(', r'emu::launch(\1, \2, ', s, flags=re.S)
s = re.sub(r'extern __shared__ (?:__align__\(\d+\) )?([\w:]+) (\w+)\[\];',
           r'\1* const \2 = reinterpret_cast<\1*>(emu::dyn_smem());', s)
open(dst, 'w').write('#line 1 "%s"\n' % src + s)

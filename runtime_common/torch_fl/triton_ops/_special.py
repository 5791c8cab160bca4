"""The `special` family's kernels (ops.yaml lists them): ports of ATen's Cephes-based
special functions (aten/src/ATen/native/Math.h) with their coefficient tables, branch
points, series and recurrences, operation for operation.

Precision follows ATen's CPU kernels: they compute in T, the common dtype (float for half
types, rounded on store), with the libm functions of T. Here the arithmetic runs in T too
and each libm call (exp, log, sqrt, sin, cos) is evaluated in fp64 and rounded to T once, as
a correctly rounded libm would: fp32 results then round, overflow (exp of 89 is inf) and
lose phase (cos(x - pi/4) of a large fp32 x) where ATen's do, which no fp64 evaluation of
the whole formula reproduces. Two float details are ATen's platform's own, and matter
because the polynomials amplify them by the degree: acos is glibc's acosf algorithm, and
the recurrences round `a * b - c` once, as ATen's FMA-contracted x86 build does.
"""
from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported
from . import _kernels as K
from . import _launch
from ._common import (cdiv, check_kernel_dtypes, copy_into, device_of, dtype_code, empty, float_of, operand, promote,
                      resize_out, shape_of)

_BLOCK = 1024
_HALF = (torch.float16, torch.bfloat16)

# ---------------------------------------------------------------- op ids ---
I0 = tl.constexpr(0)
I0E = tl.constexpr(1)
I1 = tl.constexpr(2)
I1E = tl.constexpr(3)
BESSEL_J0 = tl.constexpr(4)
BESSEL_J1 = tl.constexpr(5)
BESSEL_Y0 = tl.constexpr(6)
BESSEL_Y1 = tl.constexpr(7)
MODIFIED_BESSEL_I1 = tl.constexpr(8)
MODIFIED_BESSEL_K0 = tl.constexpr(9)
MODIFIED_BESSEL_K1 = tl.constexpr(10)
SCALED_MODIFIED_BESSEL_K0 = tl.constexpr(11)
SCALED_MODIFIED_BESSEL_K1 = tl.constexpr(12)
SPHERICAL_BESSEL_J0 = tl.constexpr(13)
AIRY_AI = tl.constexpr(14)

CHEBYSHEV_T = tl.constexpr(0)
CHEBYSHEV_U = tl.constexpr(1)
CHEBYSHEV_V = tl.constexpr(2)
CHEBYSHEV_W = tl.constexpr(3)
# the shifted ones: the same kinds (in this order) of x + x - 1
SHIFTED_CHEBYSHEV_T = tl.constexpr(4)
SHIFTED_CHEBYSHEV_U = tl.constexpr(5)
SHIFTED_CHEBYSHEV_V = tl.constexpr(6)
SHIFTED_CHEBYSHEV_W = tl.constexpr(7)
HERMITE_H = tl.constexpr(8)
HERMITE_HE = tl.constexpr(9)
LAGUERRE_L = tl.constexpr(10)
LEGENDRE_P = tl.constexpr(11)

# ------------------------------------------------------- coefficient tables ---
# Chebyshev series of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x) on [8, inf)
_I0E_A = tl.constexpr((
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06, -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03, -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01, -3.04682672343198398683e-01, 6.76795274409476084995e-01,
))
_I0E_B = tl.constexpr((
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-09, 2.26666899049817806459e-08, 2.04891858946906374183e-07,
    2.89137052083475648297e-06, 6.88975834691682398426e-05, 3.36911647825569408990e-03,
    8.04490411014108831608e-01,
))
# the same for I1; calc_i1 / calc_i1e use only the trailing 17 / 7 terms in float
_I1E_A = tl.constexpr((
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-09,
    9.38153738649577178388e-09, -4.44505912879632808065e-08, 2.00329475355213526229e-07,
    -8.56872026469545474066e-07, 3.47025130813767847674e-06, -1.32731636560394358279e-05,
    4.78156510755005422638e-05, -1.61760815825896745588e-04, 5.12285956168575772895e-04,
    -1.51357245063125314899e-03, 4.15642294431288815669e-03, -1.05640848946261981558e-02,
    2.47264490306265168283e-02, -5.29459812080949914269e-02, 1.02643658689847095384e-01,
    -1.76416518357834055153e-01, 2.52587186443633654823e-01,
))
_I1E_B = tl.constexpr((
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-09, -2.63146884688951950684e-08, -2.51223623787020892529e-07,
    -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
    7.78576235018280120474e-01,
))
_I1E_A_F32 = tl.constexpr(_I1E_A.value[-17:])
_I1E_B_F32 = tl.constexpr(_I1E_B.value[-7:])
# K0 on [0, 2] (with log and I0) and exp(x) sqrt(x) K0(x) on [2, inf); K1 likewise
_K0_A = tl.constexpr((
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01,
))
_K0_B = tl.constexpr((
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
    6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
    2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00,
))
_K1_A = tl.constexpr((
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00,
))
_K1_B = tl.constexpr((
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
    1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
    3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
    2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
    1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00,
))
# J0 / Y0: rational forms on [0, 5] and the asymptotic P, Q beyond (shared by J0 and Y0)
_J0_PP = tl.constexpr((
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
    5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
    9.99999999999999997821e-01,
))
_J0_PQ = tl.constexpr((
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
    5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
    1.00000000000000000218e+00,
))
_J0_QP = tl.constexpr((
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00,
))
_J0_QQ = tl.constexpr((
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
    7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
    2.42005740240291393179e+02,
))
_J0_RP = tl.constexpr((
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
    9.70862251047306323952e+15,
))
_J0_RQ = tl.constexpr((
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
    1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
    3.18121955943204943306e+16, 1.71086294081043136091e+18,
))
_Y0_YP = tl.constexpr((
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
    -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
    4.42733268572569800351e+16, -1.84950800436986690637e+16,
))
_Y0_YQ = tl.constexpr((
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
    8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
    2.50596256172653059228e+17,
))
# J1 / Y1 likewise
_J1_PP = tl.constexpr((
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
    5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
    1.00000000000000000254e+00,
))
_J1_PQ = tl.constexpr((
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
    5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
    9.99999999999999997461e-01,
))
_J1_QP = tl.constexpr((
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
    3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
    2.11688757100572135698e+02, 2.52070205858023719784e+01,
))
_J1_QQ = tl.constexpr((
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
    9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
    3.36093607810698293419e+02,
))
_J1_RP = tl.constexpr((
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
    3.68295732863852883286e+15,
))
_J1_RQ = tl.constexpr((
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
    2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
    8.95222336184627338078e+16, 5.32278620332680085395e+18,
))
_Y1_YP = tl.constexpr((
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
    -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17,
))
_Y1_YQ = tl.constexpr((
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
    1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
    6.87141087355300489866e+16, 3.97270608116560655612e+18,
))
# Airy Ai: x >= 2.09 (AN/AD) and x < -2.09 (AFN/AFD, AGN/AGD); a power series between
_AIRY_AN = tl.constexpr((
    3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
    1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
    1.40264691163389668864e+01, 9.99999999999999995305e-01,
))
_AIRY_AD = tl.constexpr((
    5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
    1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
    1.40959135607834029598e+01, 1.00000000000000000470e+00,
))
_AIRY_AFN = tl.constexpr((
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08,
))
_AIRY_AFD = tl.constexpr((
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
    9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
    4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07,
))
_AIRY_AGN = tl.constexpr((
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
    9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
    5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
    8.11789239554389293311e-08, 3.41551784765923618484e-10,
))
_AIRY_AGD = tl.constexpr((
    9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
    5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
    4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
    4.91834570062930015649e-09,
))

# Cephes atan: P(z) / Q(z), Q monic
_ATAN_P = tl.constexpr((
    -8.750608600031904122785e-01, -1.615753718733365076637e+01, -7.500855792314704667340e+01,
    -1.228866684490136173410e+02, -6.485021904942025371773e+01,
))
_ATAN_Q = tl.constexpr((
    1.0, 2.485846490142306297962e+01, 1.650270098316988542046e+02, 4.328810604912902668951e+02,
    4.853903996359136964868e+02, 1.945506571482613964425e+02,
))

_PI_4 = tl.constexpr(0.785398163397448309615660845819875721)
_3PI_4 = tl.constexpr(2.356194490192344928846982537459627163)
_SQRT_2_PI = tl.constexpr(0.797884560802865355879892119868763737)  # sqrt(2 / pi)
_2_PI = tl.constexpr(0.636619772367581343075535053490057448)  # 2 / pi


# ------------------------------------------- libm calls, rounded once to T ---
@triton.jit
def _exp(x):
    return tl.exp(x.to(tl.float64)).to(x.dtype)


@triton.jit
def _log(x):
    return tl.log(x.to(tl.float64)).to(x.dtype)


@triton.jit
def _sqrt(x):
    return tl.sqrt(x.to(tl.float64)).to(x.dtype)


@triton.jit
def _sin(x):
    return tl.sin(x.to(tl.float64)).to(x.dtype)


@triton.jit
def _cos(x):
    return tl.cos(x.to(tl.float64)).to(x.dtype)


@triton.jit
def _atan_nonneg(r):
    """Cephes atan for r >= 0 in fp64 (its own: the interpreter has no libdevice atan, and
    _kernels._atan's quadrant offsets are fp32 constants, ~4e-8 off in fp64). Its branch
    points need not be exact, so they are compared as Python floats."""
    zero = tl.zeros_like(r)
    big = r > 2.41421356237309504880
    mid = r > 0.66
    xr = tl.where(big, -1.0 / r, tl.where(mid, (r - 1.0) / (r + 1.0), r))
    # pi/2 and pi/4 (as tensors: a Python float in tl.where would be an fp32 constant) and the
    # bits of them beyond a double, added last
    base = tl.where(big, zero + 1.57079632679489661923, tl.where(mid, zero + 0.78539816339744830962, zero))
    more_bits = tl.where(big, zero + 6.123233995736765886130e-17,
                         tl.where(mid, zero + 3.061616997868382943065e-17, zero))
    z = xr * xr
    z = z * _horner(z, _ATAN_P, 5) / _horner(z, _ATAN_Q, 6)
    return base + ((xr * z + xr) + more_bits)


@triton.jit
def _acosf_rational(z):
    p = z * (1.6666667163e-01 + z * (-3.2556581497e-01 + z * (2.0121252537e-01 + z * (
        -4.0055535734e-02 + z * (7.9153501429e-04 + z * 3.4793309169e-05)))))
    q = 1.0 + z * (-2.4033949375e+00 + z * (2.0209457874e+00 + z * (-6.8828397989e-01 + z * 7.7038154006e-02)))
    return p / q


@triton.jit
def _acosf(x):
    """glibc's acosf (fdlibm's e_acosf.c) for |x| < 1, operation for operation: it is 1 ulp
    off in ~0.25% of inputs, which Chebyshev's cos(n acos(x)) multiplies by n."""
    pio2_hi = tl.zeros_like(x) + 1.5707962513e+00
    pio2_lo = tl.zeros_like(x) + 7.5497894159e-08
    small = pio2_hi - (x - (pio2_lo - x * _acosf_rational(x * x)))
    small = tl.where(tl.abs(x) <= 2.0 ** -26, pio2_hi + pio2_lo, small)
    z = (1.0 + x) * 0.5
    s = _sqrt(z)
    negative = 3.1415925026e+00 - 2.0 * (s + (_acosf_rational(z) * s - pio2_lo))
    z = (1.0 - x) * 0.5
    s = _sqrt(z)
    high = (s.to(tl.int32, bitcast=True) & -4096).to(tl.float32, bitcast=True)  # s's leading 12 bits
    c = (z - high * high) / (s + high)
    positive = 2.0 * (high + (_acosf_rational(z) * s + c))
    return tl.where(tl.abs(x) < 0.5, small, tl.where(x < 0.0, negative, positive))


@triton.jit
def _acos(x):
    # for |x| < 1; double: 2 atan(sqrt((1 - x) / (1 + x))), well conditioned at both ends
    if x.dtype == tl.float32:
        return _acosf(x)
    else:
        return 2.0 * _atan_nonneg(tl.sqrt(1.0 - x) / tl.sqrt(1.0 + x))


@triton.jit
def _fms(a, b, c):
    """a * b - c rounded once: ATen's CPU build (GCC, -mfma) contracts its recurrences so,
    and in float the recurrences amplify that rounding difference beyond the tolerance."""
    if a.dtype == tl.float32:
        return (a.to(tl.float64) * b.to(tl.float64) - c.to(tl.float64)).to(tl.float32)
    else:
        return tl.fma(a, b, -c)


@triton.jit
def _constant(x, VALUE: tl.constexpr):
    """VALUE in x's dtype, for comparisons: `tensor < 2.09` rounds the Python float to fp32
    first (tl.tensor's comparison operators), which misplaces an fp64 branch point."""
    return tl.full(x.shape, VALUE, x.dtype)


# ------------------------------------------------------ series evaluation ---
@triton.jit
def _chbevl(y, COEF: tl.constexpr, N: tl.constexpr):
    """Cephes chbevl: the Chebyshev series COEF[:N] (highest term first) at y, by Clenshaw."""
    b0 = tl.zeros_like(y) + COEF[0]
    b1 = tl.zeros_like(y)
    b2 = tl.zeros_like(y)
    for i in tl.static_range(1, N):
        b2 = b1
        b1 = b0
        b0 = y * b1 - b2 + COEF[i]
    return 0.5 * (b0 - b2)


@triton.jit
def _horner(z, COEF: tl.constexpr, N: tl.constexpr):
    """COEF[:N] (highest power first) at z, from 0 as ATen's loops (so inf/nan z propagate alike)."""
    acc = tl.zeros_like(z)
    for i in tl.static_range(N):
        acc = acc * z + COEF[i]
    return acc


@triton.jit
def _while_any(live):
    return tl.max(live.to(tl.int32), 0) > 0


# ---------------------------------------------------- modified Bessel I, K ---
@triton.jit
def _i0(x):
    # calc_i0; modified_bessel_i0_forward performs the same operations
    ax = tl.abs(x)
    small = _exp(ax) * _chbevl(ax / 2.0 - 2.0, _I0E_A, 30)
    large = _exp(ax) * _chbevl(32.0 / ax - 2.0, _I0E_B, 25) / _sqrt(ax)
    return tl.where(ax <= 8.0, small, large)


@triton.jit
def _i0e(x):
    ax = tl.abs(x)
    small = _chbevl(ax / 2.0 - 2.0, _I0E_A, 30)
    large = _chbevl(32.0 / ax - 2.0, _I0E_B, 25) / _sqrt(ax)
    return tl.where(ax <= 8.0, small, large)


@triton.jit
def _i1(x, SCALED: tl.constexpr):
    """calc_i1 (SCALED: calc_i1e), with ATen's truncated tables in float."""
    ax = tl.abs(x)
    if x.dtype == tl.float32:
        a = _chbevl(ax / 2.0 - 2.0, _I1E_A_F32, 17)
        b = _chbevl(32.0 / ax - 2.0, _I1E_B_F32, 7)
    else:
        a = _chbevl(ax / 2.0 - 2.0, _I1E_A, 29)
        b = _chbevl(32.0 / ax - 2.0, _I1E_B, 25)
    if SCALED:
        small = a * ax
        large = b / _sqrt(ax)
    else:
        small = _exp(ax) * ax * a
        large = (_exp(ax) * b) / _sqrt(ax)
    r = tl.where(ax <= 8.0, small, large)
    return tl.where(x < 0.0, -r, r)


@triton.jit
def _modified_bessel_i1(x):
    # the full tables in every precision, and its own order of operations
    ax = tl.abs(x)
    small = _chbevl(ax / 2.0 - 2.0, _I1E_A, 29) * ax * _exp(ax)
    large = _exp(ax) * _chbevl(32.0 / ax - 2.0, _I1E_B, 25) / _sqrt(ax)
    r = tl.where(ax <= 8.0, small, large)
    return tl.where(x < 0.0, -r, r)


@triton.jit
def _modified_bessel_k0(x, SCALED: tl.constexpr):
    a = _chbevl(x * x - 2.0, _K0_A, 10)
    b = _chbevl(8.0 / x - 2.0, _K0_B, 25)
    if SCALED:
        small = (a - _log(0.5 * x) * _i0(x)) * _exp(x)
        large = b / _sqrt(x)
    else:
        # `std::log(0.5 * x)`: a double literal, so ATen evaluates this line in double
        xd = x.to(tl.float64)
        small = (a.to(tl.float64) - tl.log(0.5 * xd) * _i0(x).to(tl.float64)).to(x.dtype)
        large = _exp(-x) * b / _sqrt(x)
    r = tl.where(x <= 2.0, small, large)
    r = tl.where(x < 0.0, float("nan"), r)
    return tl.where(x == 0.0, float("inf"), r)


@triton.jit
def _modified_bessel_k1(x, SCALED: tl.constexpr):
    a = _chbevl(x * x - 2.0, _K1_A, 11)
    b = _chbevl(8.0 / x - 2.0, _K1_B, 25)
    small = _log(0.5 * x) * _modified_bessel_i1(x) + a / x
    if SCALED:
        small = small * _exp(x)
        large = b / _sqrt(x)
    else:
        large = _exp(-x) * b / _sqrt(x)
    r = tl.where(x <= 2.0, small, large)
    r = tl.where(x < 0.0, float("nan"), r)
    return tl.where(x == 0.0, float("inf"), r)


# ------------------------------------------------------------ Bessel J, Y ---
@triton.jit
def _bessel_asymptotic(ax, z, PP: tl.constexpr, PQ: tl.constexpr, QP: tl.constexpr, QQ: tl.constexpr,
                       PHASE: tl.constexpr, SECOND_KIND: tl.constexpr):
    """Hankel's asymptotic form beyond 5: J (or Y) = sqrt(2/pi) (P cos|sin - 5/x Q sin|cos)(x - PHASE) / sqrt x."""
    pp = _horner(z, PP, 7)
    pq = _horner(z, PQ, 7)
    qp = _horner(z, QP, 8)
    qq = _horner(z, QQ, 7)
    if SECOND_KIND:
        s = pp / pq * _sin(ax - PHASE) + 5.0 / ax * (qp / qq) * _cos(ax - PHASE)
    else:
        s = pp / pq * _cos(ax - PHASE) - 5.0 / ax * (qp / qq) * _sin(ax - PHASE)
    return s * _SQRT_2_PI / _sqrt(ax)


@triton.jit
def _bessel_j0(x):
    ax = tl.abs(x)
    xx = ax * ax
    tiny = 1.0 - xx / 4.0
    small = (xx - 5.78318596294678452118e+00) * (xx - 3.04712623436620863991e+01) \
        * _horner(xx, _J0_RP, 4) / _horner(xx, _J0_RQ, 8)
    large = _bessel_asymptotic(ax, 25.0 / (ax * ax), _J0_PP, _J0_PQ, _J0_QP, _J0_QQ, _PI_4, False)
    return tl.where(ax <= 5.0, tl.where(ax < _constant(ax, 0.00001), tiny, small), large)


@triton.jit
def _bessel_j1_pos(x):
    xx = x * x
    small = _horner(xx, _J1_RP, 4) / _horner(xx, _J1_RQ, 8) * x \
        * (xx - 1.46819706421238932572e+01) * (xx - 4.92184563216946036703e+01)
    large = _bessel_asymptotic(x, 5.0 / x * (5.0 / x), _J1_PP, _J1_PQ, _J1_QP, _J1_QQ, _3PI_4, False)
    return tl.where(x <= 5.0, small, large)


@triton.jit
def _bessel_j1(x):
    # odd: ATen returns -j1(-x) for x < 0
    return tl.where(x < 0.0, -_bessel_j1_pos(-x), _bessel_j1_pos(x))


@triton.jit
def _bessel_y0(x):
    xx = x * x
    small = _horner(xx, _Y0_YP, 8) / _horner(xx, _Y0_YQ, 7) + _2_PI * _log(x) * _bessel_j0(x)
    large = _bessel_asymptotic(x, 25.0 / (x * x), _J0_PP, _J0_PQ, _J0_QP, _J0_QQ, _PI_4, True)
    small = tl.where(x < 0.0, float("nan"), small)
    small = tl.where(x == 0.0, float("-inf"), small)
    return tl.where(x <= 5.0, small, large)


@triton.jit
def _bessel_y1(x):
    xx = x * x
    small = x * (_horner(xx, _Y1_YP, 6) / _horner(xx, _Y1_YQ, 8)) \
        + _2_PI * (_bessel_j1_pos(x) * _log(x) - 1.0 / x)
    large = _bessel_asymptotic(x, 5.0 / x * (5.0 / x), _J1_PP, _J1_PQ, _J1_QP, _J1_QQ, _3PI_4, True)
    small = tl.where(x <= 0.0, float("nan"), small)
    small = tl.where(x == 0.0, float("-inf"), small)
    return tl.where(x <= 5.0, small, large)


@triton.jit
def _spherical_bessel_j0(x):
    xx = x * x
    series = 1.0 + xx * (-1.0 / 6.0 + xx * (1.0 / 120.0 + xx * (-1.0 / 5040.0 + xx * (
        1.0 / 362880.0 + xx * (-1.0 / 39916800.0 + xx * (1.0 / 6227020800.0))))))
    r = tl.where(tl.abs(x) < 0.5, series, _sin(x) / x)
    return tl.where(tl.abs(x) == float("inf"), 0.0, r)


# ------------------------------------------------------------------- Airy ---
@triton.jit
def _airy_ai(x):
    # x < -2.09: oscillating asymptotic form
    zeta_neg = -2.0 * x * _sqrt(-x) / 3.0
    z = 1.0 / zeta_neg
    zz = z * z
    afn = _horner(zz, _AIRY_AFN, 9)
    afd = _horner(zz, _AIRY_AFD, 9)
    agn = _horner(zz, _AIRY_AGN, 11)
    agd = _horner(zz, _AIRY_AGD, 10)
    t = zeta_neg + 0.25 * 3.141592653589793
    negative = 5.64189583547756286948e-01 / _sqrt(_sqrt(-x)) \
        * (_sin(t) * (1.0 + z * z * afn / afd) - _cos(t) * (z * agn / agd))
    # x >= 2.09: exponentially decaying asymptotic form
    zeta = 2.0 * x * _sqrt(x) / 3.0
    an = _horner(1.0 / zeta, _AIRY_AN, 8)
    ad = _horner(1.0 / zeta, _AIRY_AD, 8)
    positive = 5.64189583547756286948e-01 * (an / ad) / (2.0 * _sqrt(_sqrt(x)) * _exp(zeta))
    # between: Maclaurin series of the two Airy components, summed until a term is below epsilon
    if x.dtype == tl.float32:
        eps = 1.1920928955078125e-07
    else:
        eps = 2.220446049250313e-16
    above = x >= _constant(x, 2.09)
    below = x < _constant(x, -2.09)
    series_domain = ~below & ~above
    xs = tl.where(series_domain, x, 0.0)
    f = tl.zeros_like(x) + 1.0
    g = xs
    k = tl.zeros_like(x) + 1.0
    m = tl.zeros_like(x) + 1.0
    n = xs
    z3 = xs * xs * xs
    live = series_domain
    while _while_any(live):
        m_next = m * z3
        k_next = k + 1.0
        m_next /= k_next
        n_next = n * z3
        k_next += 1.0
        n_next /= k_next
        m_next /= k_next
        f_next = f + m_next
        k_next += 1.0
        n_next /= k_next
        g = tl.where(live, g + n_next, g)
        f = tl.where(live, f_next, f)
        k = tl.where(live, k_next, k)
        m = tl.where(live, m_next, m)
        n = tl.where(live, n_next, n)
        live = live & (tl.abs(m / f) > eps)
    series = 0.355028053887817239260 * f - 0.258819403792806798405 * g
    r = tl.where(above, positive, series)
    r = tl.where(below, negative, r)
    r = tl.where(x > _constant(x, 103.892), 0.0, r)
    return tl.where(tl.abs(x) == float("inf"), float("nan"), r)


@triton.jit
def _unary(x, OP: tl.constexpr):
    if OP == I0:
        return _i0(x)
    elif OP == I0E:
        return _i0e(x)
    elif OP == I1:
        return _i1(x, False)
    elif OP == I1E:
        return _i1(x, True)
    elif OP == BESSEL_J0:
        return _bessel_j0(x)
    elif OP == BESSEL_J1:
        return _bessel_j1(x)
    elif OP == BESSEL_Y0:
        return _bessel_y0(x)
    elif OP == BESSEL_Y1:
        return _bessel_y1(x)
    elif OP == MODIFIED_BESSEL_I1:
        return _modified_bessel_i1(x)
    elif OP == MODIFIED_BESSEL_K0:
        return _modified_bessel_k0(x, False)
    elif OP == MODIFIED_BESSEL_K1:
        return _modified_bessel_k1(x, False)
    elif OP == SCALED_MODIFIED_BESSEL_K0:
        return _modified_bessel_k0(x, True)
    elif OP == SCALED_MODIFIED_BESSEL_K1:
        return _modified_bessel_k1(x, True)
    elif OP == SPHERICAL_BESSEL_J0:
        return _spherical_bessel_j0(x)
    else:
        tl.static_assert(OP == AIRY_AI, "unknown special function")
        return _airy_ai(x)


@triton.jit
def special_unary_kernel(x, out, N, OP: tl.constexpr, ODT: tl.constexpr, BLOCK: tl.constexpr):
    """out = OP(x) over N contiguous elements; x holds the compute dtype T (fp32 or fp64)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    v = tl.load(x + offs, mask=mask, other=0)
    tl.store(out + offs, K._to_odt(_unary(v, OP), ODT), mask=mask)


# ------------------------------------------------------------ polynomials ---
@triton.jit
def _degree(nf):
    """ATen's static_cast<int64_t>(n) of the degree (held in T): truncation; NaN, inf and
    out-of-range values give INT64_MIN on x86 (and -1 for Hermite): a negative degree either way."""
    ok = (nf >= -9.223372036854775808e18) & (nf < 9.223372036854775808e18)
    return tl.where(ok, tl.where(ok, nf, 0.0).to(tl.int64), -1)


@triton.jit
def _recurrence_step(x, j, p, q, KIND: tl.constexpr):
    """r of ATen's loop at its j-th iteration (j = 1, 2, ...) for a polynomial KIND."""
    k = j.to(x.dtype)
    if KIND == HERMITE_H:
        return _fms(x + x, q, (j + j).to(x.dtype) * p)
    elif KIND == HERMITE_HE:
        return _fms(x, q, k * p)
    elif KIND == LAGUERRE_L:
        return _fms((j + j).to(x.dtype) + (1.0 - x), q, k * p) / (j + 1).to(x.dtype)
    elif KIND == LEGENDRE_P:
        return _fms((j + j + 1).to(x.dtype) * x, q, k * p) / (j + 1).to(x.dtype)
    else:  # every Chebyshev kind, shifted or not, at x = its (shifted) argument
        return _fms(x + x, q, p)


@triton.jit
def _recurrence(x, n, q, live, KIND: tl.constexpr):
    """ATen's three-term loop from p = 1 and q = P_1(x) on the lanes `live`: n - 1 iterations
    per lane (each lane stops at its own degree), or until q is NaN; returns P_n = q."""
    p = tl.zeros_like(x) + 1.0
    j = tl.zeros_like(n) + 1
    live = live & (j < n) & (q == q)
    while _while_any(live):
        r = _recurrence_step(x, j, p, q, KIND)
        p = tl.where(live, q, p)
        q = tl.where(live, r, q)
        j += 1
        live = live & (j < n) & (q == q)
    return q


@triton.jit
def _chebyshev(t, n, KIND: tl.constexpr, SHIFTED: tl.constexpr):
    """Chebyshev KIND (T/U/V/W) at t; SHIFTED: the shifted polynomial of x, t = x + x - 1.
    The branch tests of both forms coincide in t (|x| == 1 there, x == 1 or x == 0 here),
    except for the trigonometric form's degree thresholds and W's fallback at
    cos(acos(t) / 2) == 1."""
    nf = n.to(t.dtype)
    even = n % 2 == 0
    theta = _acos(t)
    if KIND == CHEBYSHEV_T:
        first = t
        at_one = tl.zeros_like(t) + 1.0
        at_minus_one = tl.where(even, 1.0, -1.0)
        trig = _cos(nf * theta)
        trig_from = 6
    elif KIND == CHEBYSHEV_U:
        first = t + t
        at_one = (n + 1).to(t.dtype)
        at_minus_one = tl.where(even, n + 1, -(n + 1)).to(t.dtype)
        s = _sin(theta)
        trig = tl.where(s != 0.0, _sin((n + 1).to(t.dtype) * theta) / s,
                        (n + 1).to(t.dtype) * _cos((n + 1).to(t.dtype) * theta) / t)
        trig_from = 6 if SHIFTED else 8
    elif KIND == CHEBYSHEV_V:
        first = t + t - 1.0
        at_one = tl.zeros_like(t) + 1.0
        at_minus_one = tl.where(even, n + n + 1, -(n + n + 1)).to(t.dtype)
        trig = tl.where(_sin(theta / 2.0) != 1.0, _cos((nf + 0.5) * theta) / _cos(theta / 2.0), at_minus_one)
        trig_from = 6 if SHIFTED else 8
    else:
        first = t + t + 1.0
        at_one = (n + n + 1).to(t.dtype)
        at_minus_one = tl.where(even, 1.0, -1.0)
        if SHIFTED:
            fallback = at_minus_one
            trig_from = 4
        else:
            fallback = tl.where(t > 0.0, at_one, at_minus_one)
            trig_from = 8
        trig = tl.where(_cos(theta / 2.0) != 1.0, _sin((nf + 0.5) * theta) / _sin(theta / 2.0), fallback)
    use_trig = (n > trig_from) & (tl.abs(t) < 1.0)
    r = _recurrence(t, n, first, (n >= 2) & ~use_trig & (tl.abs(t) != 1.0), CHEBYSHEV_T)
    # ATen's tests, applied last-checked first so that its order wins
    r = tl.where(n == 1, first, r)
    r = tl.where(n == 0, 1.0, r)
    r = tl.where(use_trig, trig, r)
    r = tl.where(t == -1.0, at_minus_one, r)
    r = tl.where(t == 1.0, at_one, r)
    return tl.where(n < 0, 0.0, r)


@triton.jit
def _hermite(x, n, KIND: tl.constexpr):
    # degrees above 128 (float) / 512 (double) are NaN in ATen
    if x.dtype == tl.float32:
        limit = 128
    else:
        limit = 512
    if KIND == HERMITE_H:
        first = x + x
    else:
        first = x
    r = _recurrence(x, n, first, (n >= 2) & (n <= limit), KIND)
    r = tl.where(n > limit, float("nan"), r)
    r = tl.where(n == 1, first, r)
    r = tl.where(n == 0, 1.0, r)
    return tl.where(n < 0, 0.0, r)


@triton.jit
def _laguerre(x, n):
    first = 1.0 - x
    r = _recurrence(x, n, first, (n >= 2) & (tl.abs(x) != 0.0), LAGUERRE_L)
    r = tl.where(n == 1, first, r)
    r = tl.where((n == 0) | (tl.abs(x) == 0.0), 1.0, r)
    return tl.where(n < 0, 0.0, r)


@triton.jit
def _legendre(x, n):
    at_one = (x > 0.0) | (n % 2 == 0)
    r = _recurrence(x, n, x, (n >= 2) & (tl.abs(x) != 1.0), LEGENDRE_P)
    r = tl.where(n == 1, x, r)
    r = tl.where(n == 0, 1.0, r)
    r = tl.where(tl.abs(x) == 1.0, tl.where(at_one, 1.0, -1.0), r)
    return tl.where(n < 0, 0.0, r)


@triton.jit
def _polynomial(x, n, KIND: tl.constexpr):
    if KIND < SHIFTED_CHEBYSHEV_T:
        return _chebyshev(x, n, KIND, False)
    elif KIND < HERMITE_H:
        return _chebyshev(x + x - 1.0, n, KIND - SHIFTED_CHEBYSHEV_T, True)
    elif KIND == LAGUERRE_L:
        return _laguerre(x, n)
    elif KIND == LEGENDRE_P:
        return _legendre(x, n)
    else:
        return _hermite(x, n, KIND)


@triton.jit
def polynomial_kernel(x, n, out, N, KIND: tl.constexpr, ODT: tl.constexpr, BLOCK: tl.constexpr):
    """out = P_n(x) over N contiguous elements; x and the degree n both hold T (fp32 or fp64),
    as ATen's TensorIterator hands them to the kernel."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    v = tl.load(x + offs, mask=mask, other=0)
    degree = _degree(tl.load(n + offs, mask=mask, other=-1))
    tl.store(out + offs, K._to_odt(_polynomial(v, degree, KIND), ODT), mask=mask)


# ------------------------------------------------------------- host side ---
def _dense(v, shape, dtype, device):
    """v broadcast to `shape` as a contiguous tensor of `dtype` (v itself when it is one)."""
    v = operand(v, device)
    if v.dtype == dtype and tuple(v.shape) == tuple(shape) and v.is_contiguous():
        return v
    return copy_into(empty(shape, dtype, device), v)


def _compute(kernel, op, inputs, half_kernel, out=None):
    """ATen's structured float op: integers promote to the default float dtype, the common
    dtype T (float for half types) is computed in, the result rounded to the common dtype and
    then cast into `out`. Common dtypes ATen's CPU kernel lacks are declined (its error then)."""
    rdt = float_of(promote(*inputs))
    check_kernel_dtypes(inputs, rdt, out)
    if rdt in _HALF and not half_kernel:
        raise Unsupported(f"ATen's CPU kernel has no {rdt} version of this op")
    if out is not None and not torch.can_cast(rdt, out.dtype):
        raise RuntimeError(f"result type {rdt} can't be cast to the desired output type {out.dtype}")
    shape = shape_of(inputs)
    device = device_of(*inputs)
    compute = torch.float64 if rdt == torch.float64 else torch.float32
    operands = [_dense(v, shape, compute, device) for v in inputs]
    if out is not None:
        resize_out(out, shape)
    direct = out is not None and out.dtype == rdt and out.is_contiguous()
    result = out if direct else empty(shape, rdt, device)
    numel = result.numel()
    if numel:
        # no FMA contraction by the compiler: the float operations are ATen's (and glibc's) one
        # by one, contracted only where _fms says so (Triton's own launch path: FastKernel
        # takes no compile options beyond the launch shape)
        kernel[(cdiv(numel, _BLOCK),)](*operands, result, numel, op.value, ODT=dtype_code(rdt), BLOCK=_BLOCK,
                                       enable_fp_fusion=False)
    if out is None or direct:
        return result
    return copy_into(out, result)


def _unary_kernels(name, op, half_kernel=False, with_inplace=False) -> dict[str, Callable]:
    """The functional, out= (and in-place) kernels of a unary function."""
    def functional(x):
        return _compute(special_unary_kernel, op, [x], half_kernel)

    def out_variant(x, *, out):
        return _compute(special_unary_kernel, op, [x], half_kernel, out)

    def in_place(x):
        return _compute(special_unary_kernel, op, [x], half_kernel, x)

    kernels = {name: functional, name + ".out": out_variant}
    if with_inplace:
        kernels[name + "_"] = in_place
    return kernels


def _polynomial_kernels(name, kind) -> dict[str, Callable]:
    """The functional and out= kernels of an orthogonal polynomial P_n(x)."""
    def functional(x, n):
        return _compute(polynomial_kernel, kind, [x, n], False)

    def out_variant(x, n, *, out):
        return _compute(polynomial_kernel, kind, [x, n], False, out)

    return {name: functional, name + ".out": out_variant}


# ------------------------------------------------------------------- table ----
# i0, i0e, i1, i1e have Half/BFloat16 CPU kernels (computing in float); the others do not
KERNELS: dict[str, Callable] = {
    **_unary_kernels("i0", I0, half_kernel=True, with_inplace=True),
    **_unary_kernels("special_i0e", I0E, half_kernel=True),
    **_unary_kernels("special_i1", I1, half_kernel=True),
    **_unary_kernels("special_i1e", I1E, half_kernel=True),
    **_unary_kernels("special_bessel_j0", BESSEL_J0),
    **_unary_kernels("special_bessel_j1", BESSEL_J1),
    **_unary_kernels("special_bessel_y0", BESSEL_Y0),
    **_unary_kernels("special_bessel_y1", BESSEL_Y1),
    **_unary_kernels("special_modified_bessel_i0", I0),
    **_unary_kernels("special_modified_bessel_i1", MODIFIED_BESSEL_I1),
    **_unary_kernels("special_modified_bessel_k0", MODIFIED_BESSEL_K0),
    **_unary_kernels("special_modified_bessel_k1", MODIFIED_BESSEL_K1),
    **_unary_kernels("special_scaled_modified_bessel_k0", SCALED_MODIFIED_BESSEL_K0),
    **_unary_kernels("special_scaled_modified_bessel_k1", SCALED_MODIFIED_BESSEL_K1),
    **_unary_kernels("special_spherical_bessel_j0", SPHERICAL_BESSEL_J0),
    **_unary_kernels("special_airy_ai", AIRY_AI),
    **_polynomial_kernels("special_chebyshev_polynomial_t", CHEBYSHEV_T),
    **_polynomial_kernels("special_chebyshev_polynomial_u", CHEBYSHEV_U),
    **_polynomial_kernels("special_chebyshev_polynomial_v", CHEBYSHEV_V),
    **_polynomial_kernels("special_chebyshev_polynomial_w", CHEBYSHEV_W),
    **_polynomial_kernels("special_shifted_chebyshev_polynomial_t", SHIFTED_CHEBYSHEV_T),
    **_polynomial_kernels("special_shifted_chebyshev_polynomial_u", SHIFTED_CHEBYSHEV_U),
    **_polynomial_kernels("special_shifted_chebyshev_polynomial_v", SHIFTED_CHEBYSHEV_V),
    **_polynomial_kernels("special_shifted_chebyshev_polynomial_w", SHIFTED_CHEBYSHEV_W),
    **_polynomial_kernels("special_hermite_polynomial_h", HERMITE_H),
    **_polynomial_kernels("special_hermite_polynomial_he", HERMITE_HE),
    **_polynomial_kernels("special_laguerre_polynomial_l", LAGUERRE_L),
    **_polynomial_kernels("special_legendre_polynomial_p", LEGENDRE_P),
}

# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())

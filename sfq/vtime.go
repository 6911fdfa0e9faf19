package sfq

import (
	"fmt"
	"math/bits"
)

// VirtualTime is SFQ virtual time in virtual microseconds: one CPU
// millisecond of a weight-1 tenant advances its tag by 1000. It is an
// int64, never a float; arithmetic that leaves the int64 range is reported
// as ErrOverflow.
type VirtualTime int64

// Weight is a tenant's scheduling weight in Q16 fixed point: WeightOne is
// 1.0. A free tenant without decay has weight WeightOne, a gold one 8 ×
// WeightOne.
type Weight int64

// WeightOne is the weight 1.0.
const WeightOne Weight = 1 << 16

// minDecayFactor floors the decay factor at 2^-10 so a weight is never 0.
const minDecayFactor = WeightOne >> 10

// String prints a virtual time in virtual milliseconds with up to three
// decimals, trailing zeros trimmed ("125", "1000.5", "-0.25").
func (v VirtualTime) String() string { return FormatMillis(int64(v)) }

// FormatMillis prints a microsecond count as milliseconds with up to three
// decimals, trailing zeros trimmed.
func FormatMillis(us int64) string {
	neg := us < 0
	u := uint64(us)
	if neg {
		u = -u
	}
	ms, frac := u/1000, u%1000
	s := fmt.Sprintf("%d", ms)
	if frac != 0 {
		f := fmt.Sprintf("%03d", frac)
		for f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		s += "." + f
	}
	if neg {
		s = "-" + s
	}
	return s
}

// tagStep is the virtual time a job of costMs CPU milliseconds adds to the
// finish tag of a tenant of weight w: floor(costMs × 1000 / (w / 2^16)).
func tagStep(costMs int64, w Weight) (VirtualTime, error) {
	if costMs < 0 || w <= 0 {
		return 0, invalidf("", "tag step of cost %d at weight %d", costMs, w)
	}
	hi, lo := bits.Mul64(uint64(costMs), 1000*uint64(WeightOne))
	if hi >= uint64(w) {
		return 0, fmt.Errorf("%w: cost %d ms at weight %d", ErrOverflow, costMs, w)
	}
	q, _ := bits.Div64(hi, lo, uint64(w))
	if q > 1<<63-1 {
		return 0, fmt.Errorf("%w: cost %d ms at weight %d", ErrOverflow, costMs, w)
	}
	return VirtualTime(q), nil
}

// addVT adds two virtual times, checking for overflow.
func addVT(a, b VirtualTime) (VirtualTime, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, fmt.Errorf("%w: %d + %d", ErrOverflow, a, b)
	}
	return s, nil
}

// subVT subtracts two virtual times, checking for overflow.
func subVT(a, b VirtualTime) (VirtualTime, error) {
	d := a - b
	if (b > 0 && d > a) || (b < 0 && d < a) {
		return 0, fmt.Errorf("%w: %d - %d", ErrOverflow, a, b)
	}
	return d, nil
}

// halfPowerTable[i] = round(2^(-i/256) × 2^30), i = 0..256.
var halfPowerTable = [257]int64{
	1073741824, 1070838486, 1067942999, 1065055341, 1062175491, 1059303428, 1056439131, 1053582579,
	1050733751, 1047892626, 1045059183, 1042233401, 1039415261, 1036604740, 1033801819, 1031006477,
	1028218693, 1025438448, 1022665720, 1019900489, 1017142735, 1014392438, 1011649578, 1008914134,
	1006186087, 1003465416, 1000752102, 998046124, 995347464, 992656100, 989972014, 987295185,
	984625594, 981963222, 979308048, 976660054, 974019220, 971385527, 968758955, 966139485,
	963527098, 960921775, 958323496, 955732243, 953147997, 950570738, 948000448, 945437108,
	942880699, 940331203, 937788600, 935252872, 932724001, 930201967, 927686753, 925178340,
	922676710, 920181844, 917693724, 915212331, 912737649, 910269657, 907808339, 905353676,
	902905651, 900464244, 898029440, 895601218, 893179563, 890764456, 888355878, 885953814,
	883558244, 881169153, 878786521, 876410331, 874040567, 871677210, 869320244, 866969651,
	864625413, 862287515, 859955938, 857630665, 855311680, 852998965, 850692504, 848392279,
	846098274, 843810471, 841528855, 839253408, 836984114, 834720956, 832463917, 830212982,
	827968132, 825729353, 823496627, 821269938, 819049271, 816834607, 814625932, 812423229,
	810226483, 808035676, 805850792, 803671817, 801498734, 799331526, 797170178, 795014675,
	792865000, 790721137, 788583072, 786450787, 784324269, 782203500, 780088465, 777979150,
	775875538, 773777614, 771685363, 769598769, 767517817, 765442492, 763372778, 761308661,
	759250125, 757197155, 755149737, 753107854, 751071493, 749040637, 747015274, 744995386,
	742980960, 740971982, 738968435, 736970306, 734977579, 732990241, 731008277, 729031671,
	727060411, 725094480, 723133865, 721178552, 719228525, 717283772, 715344277, 713410026,
	711481005, 709557200, 707638598, 705725183, 703816941, 701913860, 700015924, 698123120,
	696235434, 694352853, 692475362, 690602947, 688735596, 686873293, 685016026, 683163781,
	681316545, 679474303, 677637043, 675804750, 673977412, 672155015, 670337545, 668524990,
	666717336, 664914570, 663116678, 661323648, 659535466, 657752119, 655973594, 654199878,
	652430958, 650666822, 648907455, 647152846, 645402981, 643657847, 641917433, 640181724,
	638450708, 636724373, 635002706, 633285695, 631573326, 629865587, 628162466, 626463950,
	624770026, 623080683, 621395908, 619715688, 618040012, 616368866, 614702239, 613040119,
	611382493, 609729349, 608080675, 606436459, 604796689, 603161352, 601530438, 599903933,
	598281827, 596664106, 595050760, 593441776, 591837143, 590236848, 588640881, 587049229,
	585461881, 583878825, 582300049, 580725543, 579155293, 577589290, 576027521, 574469975,
	572916640, 571367506, 569822560, 568281792, 566745190, 565212742, 563684439, 562160268,
	560640218, 559124278, 557612438, 556104685, 554601009, 553101399, 551605844, 550114332,
	548626854, 547143398, 545663953, 544188508, 542717053, 541249576, 539786068, 538326517,
	536870912,
}

// maxHalfPowerDenominator bounds d in HalfPower so the interpolation
// products stay inside int64 (≈ 35,000 years in milliseconds).
const maxHalfPowerDenominator = 1 << 40

// HalfPower returns 2^(-n/d) in Q16 fixed point (65536 = 1.0), for n >= 0
// and 0 < d <= 2^40. The integer part of n/d is a shift; the fraction is
// looked up in a 257-entry Q30 table with linear interpolation, then
// rounded to Q16. The result is within one Q16 unit of the exact value and
// bit-identical on every machine.
func HalfPower(n, d int64) int64 {
	if n <= 0 {
		return int64(WeightOne)
	}
	if d <= 0 || d > maxHalfPowerDenominator {
		return 0
	}
	q := n / d
	if q >= 17 { // 2^-17 is below half a Q16 unit
		return 0
	}
	r := n % d
	scaled := r * 256 // r < d <= 2^40, so this fits
	idx, rem := scaled/d, scaled%d
	lo, hi := halfPowerTable[idx], halfPowerTable[idx+1]
	v := lo - (lo-hi)*rem/d // (lo-hi) < 2^22, rem < 2^40
	shift := uint(q) + 14
	return (v + 1<<(shift-1)) >> shift
}

// decayUsage returns usage × 2^(-elapsed/halfLife), floored, for usage in
// CPU milliseconds.
func decayUsage(usage int64, elapsed, halfLife int64) int64 {
	if usage <= 0 || elapsed <= 0 {
		return max(usage, 0)
	}
	f := HalfPower(elapsed, halfLife)
	hi, lo := bits.Mul64(uint64(usage), uint64(f))
	return int64(hi<<48 | lo>>16)
}

// decayFactor is 2^(-usage/norm) in Q16, floored at 2^-10.
func decayFactor(usage, norm int64) Weight {
	f := Weight(HalfPower(usage, norm))
	return max(f, minDecayFactor)
}

// TagStep is tagStep for audits and checkers outside the core.
func TagStep(costMs int64, w Weight) (VirtualTime, error) { return tagStep(costMs, w) }

#!/usr/bin/env python3
"""Generates src/text/unicode_data.c: the per-character behaviour of the
BERT WordPiece tokenizer, measured on the reference itself -- the
`tokenizers` library's BertNormalizer and BertPreTokenizer, which back
transformers' BertTokenizer (transformers >= 5; the PyPI package the
pyenv python3 has) -- one code point at a time, and packed into compact
range tables:

  drop     characters clean_text removes (NUL, U+FFFD, control and other
           category C* characters except tab / newline / return)
  space    characters clean_text turns into ' ' (Unicode White_Space)
  split    characters the pre-tokenizer splits on that survive cleaning
  punct    characters the pre-tokenizer isolates (ASCII punctuation, P*)
  mn       characters strip_accents deletes (category Mn)
  lower    the lowercase of one character (char::to_lowercase, no
           final-sigma context), as runs (first, count, stride, delta),
           plus the few whose lowercase is two characters (U+0130)
  nfd      strip_accents of one character (NFD minus Mn) where that is
           neither the character itself nor empty (Hangul syllables are
           decomposed algorithmically in C and left out)

Cross-checked against Python's unicodedata (Unicode %s) where the two
should agree.  Usage:
    python3 tools/gen_unicode_table.py > src/text/unicode_data.c
"""
import sys
import unicodedata

from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

MAXCP = 0x110000
CLEAN = BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
STRIP = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
LOWER = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=True)
PRE = BertPreTokenizer()


def measure():
    """Per code point: (clean, strip, lower, pre) as the reference does them."""
    drop, space, split, punct, mn = set(), set(), set(), set(), set()
    lower, nfd = {}, {}
    for cp in range(MAXCP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        cl = CLEAN.normalize_str(c)
        if cl == "":
            drop.add(cp)
        elif cl == " " and c != " ":
            space.add(cp)
        else:
            assert cl == c, hex(cp)
            if c == " ":
                space.add(cp)
            else:
                pieces = [p for p, _ in PRE.pre_tokenize_str("a" + c + "a")]
                if pieces == ["a", c, "a"]:
                    punct.add(cp)
                elif pieces == ["a", "a"]:
                    split.add(cp)
                else:
                    assert pieces == ["a" + c + "a"], (hex(cp), pieces)
        st = STRIP.normalize_str(c)
        if st == "":
            mn.add(cp)
        elif st != c and not 0xAC00 <= cp <= 0xD7A3:
            nfd[cp] = [ord(x) for x in st]
        lo = LOWER.normalize_str(c)
        if lo != c:
            lower[cp] = [ord(x) for x in lo]
    # the C side decomposes Hangul syllables itself: check it agrees
    for cp in range(0xAC00, 0xD7A4):
        t = cp - 0xAC00
        seq = [0x1100 + t // 588, 0x1161 + (t % 588) // 28] + ([0x11A7 + t % 28] if t % 28 else [])
        assert [ord(x) for x in STRIP.normalize_str(chr(cp))] == seq, hex(cp)
    return drop, space, split, punct, mn, lower, nfd


def ranges(members):
    out = []
    for cp in sorted(members):
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def crosscheck(drop, punct, mn):
    """Where Python's unicodedata should agree (Unicode categories)."""
    bad = 0
    for cp in range(0x30000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        cat = unicodedata.category(chr(cp))
        if cat == "Mn" and cp not in mn:
            bad += 1
        if (cat.startswith("P") or 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96
                or 123 <= cp <= 126) and cp not in punct and cp not in drop:
            bad += 1
    print("unicodedata disagreements below U+30000: %d" % bad, file=sys.stderr)


def lower_runs(single):
    """(first, count, stride, delta) runs covering the one-character maps"""
    runs = []
    keys = sorted(single)
    i = 0
    while i < len(keys):
        a = keys[i]
        d = single[a] - a
        best = (1, 1)
        for stride in (1, 2):
            n = 1
            while a + n * stride in single and single[a + n * stride] - (a + n * stride) == d \
                    and all((a + n * stride - k) not in single for k in range(1, stride)):
                n += 1
            if n > best[0]:
                best = (n, stride)
        n, stride = best
        runs.append((a, n, stride, d))
        covered = {a + k * stride for k in range(n)}
        i += 1
        while i < len(keys) and keys[i] in covered:
            i += 1
    return runs


def emit_ranges(name, rs, w):
    w("static const uint32_t %s[][2] = {\n" % name)
    line = "   "
    for a, b in rs:
        item = " {0x%X,0x%X}," % (a, b)
        if len(line) + len(item) > 100:
            w(line + "\n")
            line = "   "
        line += item
    w(line + "\n};\n")


def emit_array(name, ctype, vals, w):
    w("static const %s %s[] = {\n" % (ctype, name))
    line = "   "
    for v in vals:
        item = " 0x%X," % v
        if len(line) + len(item) > 100:
            w(line + "\n")
            line = "   "
        line += item
    w(line + "\n};\n")


def main():
    w = sys.stdout.write
    import tokenizers
    w("/* unicode_data.c -- GENERATED by tools/gen_unicode_table.py from the\n"
      " * tokenizers library %s (BertNormalizer, BertPreTokenizer); do not edit.\n"
      " * The character behaviour of the BERT WordPiece tokenizer (text_impl.h). */\n"
      % tokenizers.__version__)
    w("#include \"text_impl.h\"\n\n")
    drop, space, split, punct, mn, lower, nfd = measure()
    crosscheck(drop, punct, mn)
    for name, members in (("k_drop", drop), ("k_space", space), ("k_split", split), ("k_punct", punct),
                          ("k_mn", mn)):
        emit_ranges(name, ranges(members) or [[0x110000, 0x110000]], w)
    runs = lower_runs({k: v[0] for k, v in lower.items() if len(v) == 1})
    multi = {k: v for k, v in lower.items() if len(v) > 1}
    w("/* lower-case runs: first, count, stride, delta */\n")
    w("static const int32_t k_lower[][4] = {\n")
    line = "   "
    for a, n, s, d in runs:
        item = " {0x%X,%d,%d,%d}," % (a, n, s, d)
        if len(line) + len(item) > 100:
            w(line + "\n")
            line = "   "
        line += item
    w(line + "\n};\n")
    w("static const uint32_t k_lower_multi[][4] = {  /* cp, n, lower... */\n")
    for cp, seq in sorted(multi.items()):
        assert len(seq) <= 2
        w("    {0x%X, %d, %s},\n" % (cp, len(seq), ", ".join("0x%X" % x for x in seq + [0] * (2 - len(seq)))))
    w("};\n")
    nm = nfd
    keys = sorted(nm)
    data, offs = [], []
    for k in keys:
        offs.append(len(data) | (len(nm[k]) << 16))
        data.extend(nm[k])
    assert len(data) < 65536 and max(len(v) for v in nm.values()) < 256
    w("/* NFD minus Mn: key, offset | length << 16 into k_nfd_data */\n")
    emit_array("k_nfd_key", "uint32_t", keys, w)
    emit_array("k_nfd_off", "uint32_t", offs, w)
    emit_array("k_nfd_data", "uint32_t", data, w)
    w("""
#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static bool in_ranges(const uint32_t (*r)[2], int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid - 1;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return true;
    }
    return false;
}

bool ct__uc_is_drop(uint32_t cp) { return in_ranges(k_drop, N(k_drop), cp); }
bool ct__uc_is_space(uint32_t cp) { return in_ranges(k_space, N(k_space), cp); }
bool ct__uc_is_split(uint32_t cp) { return in_ranges(k_split, N(k_split), cp); }
bool ct__uc_is_punct(uint32_t cp) { return in_ranges(k_punct, N(k_punct), cp); }
bool ct__uc_is_mn(uint32_t cp) { return in_ranges(k_mn, N(k_mn), cp); }

int ct__uc_lower(uint32_t cp, uint32_t out[2]) {
    for (int i = 0; i < N(k_lower_multi); i++)
        if (k_lower_multi[i][0] == cp) {
            out[0] = k_lower_multi[i][2];
            out[1] = k_lower_multi[i][3];
            return (int)k_lower_multi[i][1];
        }
    int lo = 0, hi = N(k_lower) - 1, hit = -1;
    while (lo <= hi) { /* last run starting at or before cp */
        int mid = (lo + hi) / 2;
        if ((int64_t)k_lower[mid][0] <= (int64_t)cp) { hit = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    out[0] = cp;
    if (hit >= 0) {
        int64_t off = (int64_t)cp - k_lower[hit][0];
        if (off % k_lower[hit][2] == 0 && off / k_lower[hit][2] < k_lower[hit][1])
            out[0] = (uint32_t)((int64_t)cp + k_lower[hit][3]);
    }
    return 1;
}

int ct__uc_strip_accents(uint32_t cp, const uint32_t **seq, uint32_t buf[3]) {
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V (T) */
        uint32_t s = cp - 0xAC00;
        buf[0] = 0x1100 + s / 588;
        buf[1] = 0x1161 + (s % 588) / 28;
        buf[2] = 0x11A7 + s % 28;
        *seq = buf;
        return s % 28 ? 3 : 2;
    }
    if (ct__uc_is_mn(cp)) { *seq = buf; return 0; }
    int lo = 0, hi = N(k_nfd_key) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < k_nfd_key[mid]) hi = mid - 1;
        else if (cp > k_nfd_key[mid]) lo = mid + 1;
        else {
            *seq = k_nfd_data + (k_nfd_off[mid] & 0xFFFF);
            return (int)(k_nfd_off[mid] >> 16);
        }
    }
    buf[0] = cp;
    *seq = buf;
    return 1;
}
""")


if __name__ == "__main__":
    __doc__ = __doc__ % unicodedata.unidata_version
    main()

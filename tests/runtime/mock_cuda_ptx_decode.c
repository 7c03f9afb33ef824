/* mock_cuda_ptx_decode.c - the PTX interpreter's decoder: PTX text as NVRTC
 * makes it for libtinyc's kernels -> per .entry an array of instr (opcode,
 * types, modifier, up to 5 operands with registers numbered per kernel,
 * immediates, special registers, addresses [reg+off] / [symbol+off],
 * vectors {a,b,c,d}), labels resolved to instruction indices, .shared and
 * .local declarations laid out per kernel, initialized module .global
 * variables copied into host memory. A line it does not understand marks
 * its kernel uninterpretable (ptx_run then refuses it, naming the line).
 */
#include "mock_cuda_ptx_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = {
    [T_NONE] = "",   [T_PRED] = "pred", [T_B8] = "b8",   [T_B16] = "b16", [T_B32] = "b32",
    [T_B64] = "b64", [T_U8] = "u8",     [T_U16] = "u16", [T_U32] = "u32", [T_U64] = "u64",
    [T_S8] = "s8",   [T_S16] = "s16",   [T_S32] = "s32", [T_S64] = "s64", [T_F16] = "f16",
    [T_F32] = "f32", [T_F64] = "f64",
};

static const struct {
    const char *name;
    opcode op;
} op_names[] = {
    {"add", OP_ADD},   {"sub", OP_SUB},     {"mul", OP_MUL}, {"mad", OP_MAD}, {"fma", OP_FMA},
    {"div", OP_DIV},   {"rem", OP_REM},     {"neg", OP_NEG}, {"abs", OP_ABS}, {"min", OP_MIN},
    {"max", OP_MAX},   {"and", OP_AND},     {"or", OP_OR},   {"xor", OP_XOR}, {"not", OP_NOT},
    {"cnot", OP_CNOT}, {"shl", OP_SHL},     {"shr", OP_SHR}, {"bfi", OP_BFI}, {"prmt", OP_PRMT}, {"selp", OP_SELP},
    {"setp", OP_SETP}, {"mov", OP_MOV},     {"ld", OP_LD},   {"st", OP_ST},   {"cvt", OP_CVT},
    {"cvta", OP_CVTA}, {"bra", OP_BRA},     {"ret", OP_RET}, {"bar", OP_BAR}, {"barrier", OP_BAR},
    {"ex2", OP_EX2},   {"lg2", OP_LG2},     {"sin", OP_SIN}, {"cos", OP_COS}, {"rcp", OP_RCP},
    {"sqrt", OP_SQRT}, {"rsqrt", OP_RSQRT},
};

/* the spelling of each modifier (mock_cuda_ptx_int.h); "lo"/"hi" twice: widths and comparisons */
static const struct {
    const char *name;
    int mod;
} mod_names[] = {
    {"lo", M_LO},       {"hi", M_HI},         {"wide", M_WIDE},     {"eq", C_EQ},
    {"ne", C_NE},       {"lt", C_LT},         {"le", C_LE},         {"gt", C_GT},
    {"ge", C_GE},       {"lo", C_LT},         {"ls", C_LE},         {"hi", C_GT},
    {"hs", C_GE},       {"equ", C_EQU},       {"neu", C_NEU},       {"ltu", C_LTU},
    {"leu", C_LEU},     {"gtu", C_GTU},       {"geu", C_GEU},       {"num", C_NUM},
    {"nan", C_NAN},     {"rni", R_RNI},       {"rzi", R_RZI},       {"rmi", R_RMI},
    {"rpi", R_RPI},     {"global", S_GLOBAL}, {"shared", S_SHARED}, {"local", S_LOCAL},
    {"param", S_PARAM}, {"ftz", M_FTZ},
};

/* modifiers that change nothing here (rounding to nearest is what C does;
 * .nc, .uni, .sync, .aligned, .approx, .full are hints or defaults) */
static const char *const ignored_mods[] = {"rn",     "nc",   "uni", "sync", "aligned",
                                           "approx", "full", "to",  NULL};

/* ---- decoding -------------------------------------------------------------------------- */

static unsigned hash_str(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* true if a .reg line declared name ("%f12" by "%f<57>", "%SP" by "%SP") */
static bool is_declared(const ptx_kernel *k, const char *name) {
    for (int i = 0; i < k->n_rdecls; i++) {
        size_t n = strlen(k->rdecls[i].prefix);
        if (strncmp(name, k->rdecls[i].prefix, n) != 0) continue;
        if (k->rdecls[i].count < 0 && name[n] == '\0') return true;
        if (k->rdecls[i].count >= 0 && isdigit((unsigned char)name[n])) {
            char *end;
            long v = strtol(name + n, &end, 10);
            if (*end == '\0' && v < k->rdecls[i].count) return true;
        }
    }
    return false;
}

/* records the registers of one ".reg .TYPE %a<N>, %b;" line; false on out of memory */
static bool declare_regs(ptx_kernel *k, const char *s) {
    for (const char *p = strchr(s, '%'); p; p = strchr(p, '%')) {
        size_t n = strcspn(p, "<,; \t");
        if (n >= sizeof k->rdecls[0].prefix) return true; /* never matches: uses fail */
        reg_decl *g = realloc(k->rdecls, sizeof *g * (size_t)(k->n_rdecls + 1));
        if (!g) return false;
        k->rdecls = g;
        reg_decl *r = &k->rdecls[k->n_rdecls++];
        memcpy(r->prefix, p, n);
        r->prefix[n] = '\0';
        r->count = p[n] == '<' ? atoi(p + n + 1) : -1;
        p += n;
    }
    return true;
}

/* the slot of register `name` in k, made on first sight; -1 when it was
 * never declared (a special register the interpreter does not know, say) or
 * on out of memory */
static int reg_slot(ptx_kernel *k, const char *name) {
    if (k->n_regs * 2 >= k->hash_cap) {
        int cap = k->hash_cap ? 2 * k->hash_cap : 256;
        int *h = malloc(sizeof *h * (size_t)cap);
        if (!h) return -1;
        for (int i = 0; i < cap; i++) h[i] = -1;
        for (int i = 0; i < k->n_regs; i++) {
            unsigned j = hash_str(k->regs[i]) & (unsigned)(cap - 1);
            while (h[j] >= 0) j = (j + 1) & (unsigned)(cap - 1);
            h[j] = i;
        }
        free(k->reg_hash);
        k->reg_hash = h, k->hash_cap = cap;
    }
    unsigned j = hash_str(name) & (unsigned)(k->hash_cap - 1);
    for (; k->reg_hash[j] >= 0; j = (j + 1) & (unsigned)(k->hash_cap - 1))
        if (strcmp(k->regs[k->reg_hash[j]], name) == 0) return k->reg_hash[j];
    if (k->n_regs == k->cap_regs) {
        int cap = k->cap_regs ? 2 * k->cap_regs : 64;
        char **r = realloc(k->regs, sizeof *r * (size_t)cap);
        if (!r) return -1;
        k->regs = r, k->cap_regs = cap;
    }
    if (!is_declared(k, name)) return -1;
    char *copy = strdup(name);
    if (!copy) return -1;
    k->regs[k->n_regs] = copy;
    k->reg_hash[j] = k->n_regs;
    return k->n_regs++;
}

static void set_unsupported(ptx_kernel *k, int line, const char *what, const char *text) {
    if (k->unsupported[0]) return;
    snprintf(k->unsupported, sizeof k->unsupported, "line %d: %s: '%.120s'", line, what, text);
}

static ptype parse_type(const char *s) {
    for (int t = T_PRED; t <= T_F64; t++)
        if (strcmp(s, type_names[t]) == 0) return (ptype)t;
    return T_NONE;
}

/* one .shared/.local declaration "… .align A .TYPE name[N];" -> (name, bytes, align) */
static bool parse_decl(const char *s, char *name, size_t *bytes, size_t *align) {
    *align = 1;
    size_t elem = 0, count = 1;
    const char *a = strstr(s, ".align");
    if (a) *align = strtoull(a + 6, NULL, 10);
    for (const char *p = s; *p && *p != ';';) {
        if (*p == '.' && isalpha((unsigned char)p[1])) {
            char tok[16];
            size_t n = strcspn(p + 1, " \t;[");
            if (n < sizeof tok) {
                memcpy(tok, p + 1, n);
                tok[n] = '\0';
                ptype t = parse_type(tok);
                if (t != T_NONE) elem = (size_t)tbits(t) / 8;
            }
            p += 1 + n;
            continue;
        }
        if (isalpha((unsigned char)*p) || *p == '_' || *p == '$') {
            size_t n = strcspn(p, " \t;[");
            if (n >= 96) return false;
            memcpy(name, p, n);
            name[n] = '\0';
            p += n;
            while (*p == '[') {
                count *= strtoull(p + 1, NULL, 10);
                p = strchr(p, ']');
                if (!p) return false;
                p++;
            }
            continue;
        }
        p++;
    }
    *bytes = elem * count;
    return elem > 0 && name[0];
}

static bool add_symbol(ptx_kernel *k, const char *name, uint8_t space, size_t bytes, size_t align) {
    if (k->n_syms == k->cap_syms) {
        int cap = k->cap_syms ? 2 * k->cap_syms : 8;
        symbol *s = realloc(k->syms, sizeof *s * (size_t)cap);
        if (!s) return false;
        k->syms = s, k->cap_syms = cap;
    }
    size_t *size = space == SYM_SHARED ? &k->shared_size : &k->local_size;
    if (align < 1) align = 1;
    *size = (*size + align - 1) / align * align;
    symbol *s = &k->syms[k->n_syms++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->space = space;
    s->off = (int64_t)*size;
    *size += bytes;
    return true;
}

/* resolves identifier name (a symbol, a parameter or a module variable) into o */
static bool resolve_symbol(ptx_kernel *k, const char *name, operand *o) {
    for (int i = 0; i < k->n_syms; i++)
        if (strcmp(k->syms[i].name, name) == 0) {
            o->sym = k->syms[i].space;
            o->imm += k->syms[i].off;
            return true;
        }
    for (int i = 0; i < k->n_params; i++)
        if (strcmp(k->params[i], name) == 0) {
            o->sym = SYM_PARAM;
            o->imm += (int64_t)i * 4096;
            return true;
        }
    for (int i = 0; k->m && i < k->m->n_vars; i++)
        if (strcmp(k->m->vars[i].name, name) == 0) {
            o->sym = SYM_NONE;
            o->imm += (int64_t)(uintptr_t)k->m->vars[i].data;
            return true;
        }
    return false;
}

static const char *const specials[12] = {"%tid.x",   "%tid.y",    "%tid.z",    "%ntid.x",
                                         "%ntid.y",  "%ntid.z",   "%ctaid.x",  "%ctaid.y",
                                         "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z"};

/* the label fixups of one body: bra operands whose targets come later */
typedef struct {
    char name[64];
    int at; /* instruction index; -1 for a label definition's record */
} label;

typedef struct {
    label *defs, *uses;
    int n_defs, n_uses, cap_defs, cap_uses;
} labels;

static bool push_label(label **v, int *n, int *cap, const char *name, int at) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        label *g = realloc(*v, sizeof *g * (size_t)c);
        if (!g) return false;
        *v = g, *cap = c;
    }
    snprintf((*v)[*n].name, sizeof(*v)[*n].name, "%s", name);
    (*v)[(*n)++].at = at;
    return true;
}

/* operand text s (trimmed) -> o; false if not understood */
static bool parse_operand(ptx_kernel *k, char *s, operand *o, labels *lb, int at, bool is_bra) {
    memset(o, 0, sizeof *o);
    o->reg = -1;
    size_t n = strlen(s);
    if (n == 0) return false;
    if (s[0] == '%') {
        for (int i = 0; i < 12; i++)
            if (strcmp(s, specials[i]) == 0) {
                o->kind = K_SPECIAL;
                o->reg = i;
                return true;
            }
        if (strchr(s, '|')) return false; /* setp's second destination: not supported */
        o->kind = K_REG;
        o->reg = reg_slot(k, s);
        return o->reg >= 0;
    }
    if (s[0] == '{') {
        o->kind = K_VEC;
        char *p = s + 1;
        while (*p && *p != '}') {
            while (*p == ' ' || *p == '\t' || *p == ',') p++;
            size_t len = strcspn(p, " \t,}");
            if (len == 0) break;
            if (o->n_vec == MAX_VEC) return false;
            char save = p[len];
            p[len] = '\0';
            int slot = strcmp(p, "_") == 0 ? -1 : reg_slot(k, p);
            bool is_bad = slot < 0 && strcmp(p, "_") != 0;
            o->vec[o->n_vec++] = slot;
            p[len] = save;
            if (is_bad) return false;
            p += len;
        }
        return o->n_vec > 0;
    }
    if (s[0] == '[') {
        o->kind = K_ADDR;
        char *end = strchr(s, ']');
        if (!end) return false;
        *end = '\0';
        char *inner = s + 1, *plus = strchr(inner, '+');
        if (plus) {
            *plus = '\0';
            o->imm = strtoll(plus + 1, NULL, 0);
        }
        while (isspace((unsigned char)*inner)) inner++;
        for (char *t = inner + strlen(inner); t > inner && isspace((unsigned char)t[-1]);)
            *--t = '\0';
        if (inner[0] == '%') {
            o->reg = reg_slot(k, inner);
            return o->reg >= 0;
        }
        return resolve_symbol(k, inner, o);
    }
    if (s[0] == '0' && (s[1] == 'f' || s[1] == 'F') && n == 10) {
        o->kind = K_IMM;
        o->imm = (int64_t)strtoull(s + 2, NULL, 16);
        return true;
    }
    if (s[0] == '0' && (s[1] == 'd' || s[1] == 'D') && n == 18) {
        o->kind = K_IMM;
        o->imm = (int64_t)strtoull(s + 2, NULL, 16);
        return true;
    }
    if (isdigit((unsigned char)s[0]) || s[0] == '-') {
        o->kind = K_IMM;
        char *end;
        o->imm = (int64_t)strtoull(s, &end, 0);
        if (s[0] == '-') o->imm = strtoll(s, &end, 0);
        if (*end == 'U') end++;
        return *end == '\0';
    }
    if (is_bra) {
        o->kind = K_LABEL;
        return push_label(&lb->uses, &lb->n_uses, &lb->cap_uses, s, at);
    }
    o->kind = K_IMM;
    return resolve_symbol(k, s, o);
}

/* splits the operand text at top-level commas into parts (in place) */
static int split_operands(char *s, char **parts, int cap) {
    int n = 0, depth = 0;
    char *start = s;
    for (char *p = s;; p++) {
        if (*p == '{' || *p == '[') depth++;
        if (*p == '}' || *p == ']') depth--;
        if ((*p == ',' && depth == 0) || *p == '\0') {
            bool is_end = *p == '\0';
            *p = '\0';
            while (isspace((unsigned char)*start)) start++;
            for (char *t = start + strlen(start); t > start && isspace((unsigned char)t[-1]);)
                *--t = '\0';
            if (*start) {
                if (n == cap) return -1;
                parts[n++] = start;
            }
            if (is_end) break;
            start = p + 1;
        }
    }
    return n;
}

/* whether the runner computes instruction in at its types (a combination
 * it does not implement must be refused, never run wrongly) */
static bool is_supported(const instr *in) {
    ptype t = (ptype)in->t;
    bool is_float = t == T_F32 || t == T_F64, is_int = !is_float && t != T_F16 && t != T_NONE;
    switch ((opcode)in->op) {
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_MAD:
    case OP_DIV:
    case OP_NEG:
    case OP_ABS:
    case OP_MIN:
    case OP_MAX: return (is_float && in->mod == M_NONE) || (is_int && t != T_PRED);
    case OP_RCP: return (is_float && in->mod == M_NONE) || (t == T_F64 && in->mod == M_FTZ);
    case OP_FMA:
    case OP_SQRT: return is_float;
    case OP_EX2:
    case OP_LG2:
    case OP_SIN:
    case OP_COS:
    case OP_RSQRT: return t == T_F32;
    case OP_REM:
    case OP_SHL:
    case OP_SHR:
    case OP_BFI:
    case OP_CNOT: return is_int && t != T_PRED;
    case OP_PRMT: return t == T_B32 && in->mod == M_NONE; /* no .f4e, .b4e, ... modes */
    case OP_AND:
    case OP_OR:
    case OP_XOR:
    case OP_NOT: return is_int;
    case OP_SETP: return (is_float || is_int) && t != T_PRED && in->mod >= C_EQ && in->mod <= C_NAN;
    case OP_CVT: /* float -> float rounds to an integral value only with .rni & co */
        return t != T_NONE && t != T_PRED && in->t2 != T_NONE && in->t2 != T_PRED;
    case OP_BRA:
    case OP_RET:
    case OP_BAR:
    case OP_MOV:
    case OP_SELP:
    case OP_LD:
    case OP_ST:
    case OP_CVTA: return true;
    case OP_UNKNOWN: return false;
    }
    return false;
}

/* decodes one instruction line (comment and ';' removed) into in */
static bool decode(ptx_kernel *k, char *line, int lineno, instr *in, labels *lb) {
    memset(in, 0, sizeof *in);
    in->guard = -1;
    in->vec = 1;
    in->line = lineno;
    char *p = line;
    if (*p == '@') {
        p++;
        in->guard_neg = *p == '!';
        p += in->guard_neg;
        size_t len = strcspn(p, " \t");
        char save = p[len];
        p[len] = '\0';
        in->guard = reg_slot(k, p);
        p[len] = save;
        if (in->guard < 0) return false;
        p += len;
        while (isspace((unsigned char)*p)) p++;
    }
    size_t oplen = strcspn(p, " \t");
    char opname[64];
    if (oplen >= sizeof opname) return false;
    memcpy(opname, p, oplen);
    opname[oplen] = '\0';
    char *ops = p + oplen;
    /* opcode tokens: name, then modifiers and types */
    char *tok = strtok(opname, ".");
    for (size_t i = 0; i < sizeof op_names / sizeof op_names[0]; i++)
        if (strcmp(tok, op_names[i].name) == 0) in->op = (uint8_t)op_names[i].op;
    if (in->op == OP_UNKNOWN) return false;
    int n_types = 0;
    ptype types[2] = {T_NONE, T_NONE};
    while ((tok = strtok(NULL, "."))) {
        ptype t = parse_type(tok);
        if (t != T_NONE) {
            if (n_types == 2) return false;
            types[n_types++] = t;
            continue;
        }
        if (strcmp(tok, "v2") == 0 || strcmp(tok, "v4") == 0) {
            in->vec = (uint8_t)(tok[1] - '0');
            continue;
        }
        if (in->op == OP_SETP &&
            (strcmp(tok, "and") == 0 || strcmp(tok, "or") == 0 || strcmp(tok, "xor") == 0)) {
            in->bool_op = tok[0] == 'a' ? OP_AND : tok[0] == 'o' ? OP_OR : OP_XOR;
            continue;
        }
        bool known = false;
        for (int i = 0; ignored_mods[i] && !known; i++) known = strcmp(tok, ignored_mods[i]) == 0;
        /* "lo"/"hi" mean width on mul/mad and unsigned comparisons on setp */
        for (size_t i = 0; i < sizeof mod_names / sizeof mod_names[0] && !known; i++)
            if (strcmp(tok, mod_names[i].name) == 0) {
                bool is_cmp = mod_names[i].mod >= C_EQ && mod_names[i].mod <= C_NAN;
                if (is_cmp != (in->op == OP_SETP)) continue;
                in->mod = (uint8_t)mod_names[i].mod;
                known = true;
            }
        if (!known && in->op == OP_BAR && isdigit((unsigned char)tok[0])) known = true;
        if (!known) return false;
    }
    in->t = (uint8_t)types[0];
    in->t2 = (uint8_t)types[0];
    if (in->op == OP_CVT) in->t2 = (uint8_t)types[1];
    if (in->op == OP_CVTA && (in->mod == S_GLOBAL || in->mod == S_SHARED || in->mod == S_LOCAL))
        in->mod = 0;
    if (!is_supported(in)) return false;
    char *parts[MAX_OPS + 1];
    int n = split_operands(ops, parts, MAX_OPS + 1);
    if (n < 0 || n > MAX_OPS) return false;
    in->n = (uint8_t)n;
    for (int i = 0; i < n; i++)
        if (!parse_operand(k, parts[i], &in->o[i], lb, k->n_code, in->op == OP_BRA)) return false;
    if (in->op == OP_BAR && (n != 1 || in->o[0].kind != K_IMM || in->o[0].imm != 0))
        return false; /* only the whole-block barrier 0 */
    return true;
}

static bool push_instr(ptx_kernel *k, const instr *in) {
    if (k->n_code == k->cap_code) {
        int cap = k->cap_code ? 2 * k->cap_code : 256;
        instr *c = realloc(k->code, sizeof *c * (size_t)cap);
        if (!c) return false;
        k->code = c, k->cap_code = cap;
    }
    k->code[k->n_code++] = *in;
    return true;
}

/* decodes the body lines [body, end) of kernel k; false on out of memory */
static bool decode_body(ptx_kernel *k, const char *text, const char *body, const char *end) {
    labels lb = {0};
    bool ok = true;
    int lineno = 1;
    for (const char *c = text; c < body; c++) lineno += *c == '\n';
    char buf[512];
    for (const char *p = body; p < end && ok; lineno++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        size_t len = (size_t)(eol - p);
        const char *next = eol + 1;
        if (len >= sizeof buf) {
            set_unsupported(k, lineno, "line too long", "");
            p = next;
            continue;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        p = next;
        char *cm = strstr(buf, "//");
        if (cm) *cm = '\0';
        char *s = buf;
        while (isspace((unsigned char)*s)) s++;
        for (char *t = s + strlen(s); t > s && isspace((unsigned char)t[-1]);) *--t = '\0';
        if (!*s || strcmp(s, "{") == 0 || strcmp(s, "}") == 0) continue;
        size_t n = strlen(s);
        if (s[n - 1] == ':') {
            s[n - 1] = '\0';
            ok = push_label(&lb.defs, &lb.n_defs, &lb.cap_defs, s, k->n_code);
            continue;
        }
        if (s[0] == '.') {
            if (strncmp(s, ".shared", 7) == 0 || strncmp(s, ".local", 6) == 0) {
                char name[96] = "";
                size_t bytes = 0, align = 1;
                if (!parse_decl(s, name, &bytes, &align))
                    set_unsupported(k, lineno, "declaration not understood", s);
                else ok = add_symbol(k, name, s[1] == 's' ? SYM_SHARED : SYM_LOCAL, bytes, align);
            } else if (strncmp(s, ".reg", 4) == 0) {
                ok = declare_regs(k, s);
            } else if (strncmp(s, ".pragma", 7) != 0 && strncmp(s, ".loc", 4) != 0) {
                set_unsupported(k, lineno, "directive not understood", s);
            }
            continue;
        }
        char *semi = strchr(s, ';');
        if (semi) *semi = '\0';
        instr in;
        char copy[512];
        snprintf(copy, sizeof copy, "%s", s);
        if (!decode(k, s, lineno, &in, &lb)) {
            set_unsupported(k, lineno, "instruction not understood", copy);
            continue;
        }
        ok = push_instr(k, &in);
    }
    for (int i = 0; ok && i < lb.n_uses; i++) {
        int target = -1;
        for (int j = 0; j < lb.n_defs && target < 0; j++)
            if (strcmp(lb.defs[j].name, lb.uses[i].name) == 0) target = lb.defs[j].at;
        if (target < 0) {
            set_unsupported(k, 0, "unknown label", lb.uses[i].name);
            continue;
        }
        instr *in = &k->code[lb.uses[i].at];
        for (int o = 0; o < in->n; o++)
            if (in->o[o].kind == K_LABEL) in->o[o].imm = target;
    }
    free(lb.defs);
    free(lb.uses);
    /* a body that runs off its end returns */
    instr ret = {.op = OP_RET, .guard = -1, .vec = 1, .line = lineno};
    return ok && push_instr(k, &ret);
}

/* the .entry header at e ("name(params) directives {"): name and params; returns the
 * body's opening brace, NULL if malformed */
static const char *decode_header(ptx_kernel *k, const char *e) {
    size_t len = strcspn(e, "( \t\n");
    if (len == 0 || len >= sizeof k->name) return NULL;
    memcpy(k->name, e, len);
    k->name[len] = '\0';
    const char *p = e + len, *open = strchr(p, '{');
    if (!open) return NULL;
    const char *lp = strchr(p, '(');
    if (lp && lp < open) {
        const char *close = strchr(lp, ')');
        if (!close) return NULL;
        for (const char *q = strstr(lp, ".param"); q && q < close; q = strstr(q + 6, ".param")) {
            const char *stop = q + strcspn(q, ",)");
            if (k->n_params == 64) return NULL;
            /* the last token before , or ) is the name; the first type token its type */
            const char *nm = stop;
            while (nm > q && isspace((unsigned char)nm[-1])) nm--;
            const char *ne = nm;
            while (nm > q && !isspace((unsigned char)nm[-1])) nm--;
            size_t nlen = (size_t)(ne - nm);
            const char *br = memchr(nm, '[', nlen);
            if (br) nlen = (size_t)(br - nm);
            if (nlen >= sizeof k->params[0]) return NULL;
            memcpy(k->params[k->n_params], nm, nlen);
            k->params[k->n_params][nlen] = '\0';
            k->param_t[k->n_params] = T_NONE;
            for (const char *t = q + 6; t < nm; t++)
                if (*t == '.') {
                    char tok[8];
                    size_t tl = strcspn(t + 1, " \t");
                    if (tl < sizeof tok) {
                        memcpy(tok, t + 1, tl);
                        tok[tl] = '\0';
                        if (parse_type(tok) != T_NONE) {
                            k->param_t[k->n_params] = (uint8_t)parse_type(tok);
                            break;
                        }
                    }
                }
            k->n_params++;
        }
    }
    const char *mx = strstr(p, ".maxntid");
    if (mx && mx < open) {
        unsigned x = 1, y = 1, z = 1;
        if (sscanf(mx + 8, " %u , %u , %u", &x, &y, &z) < 1) return NULL;
        k->maxntid = x * y * z;
    }
    return open;
}

/* a module-scope ".global .align A .TYPE name[N] = {v, ...};" or without initializer */
static bool decode_global(ptx_module *m, const char *s) {
    char name[96] = "";
    size_t bytes = 0, align = 1;
    if (!parse_decl(s, name, &bytes, &align)) return false;
    size_t elem = 1;
    for (const char *p = s; *p && *p != '['; p++)
        if (*p == '.' && (p[1] == 'b' || p[1] == 'u' || p[1] == 's' || p[1] == 'f') &&
            isdigit((unsigned char)p[2]))
            elem = strtoull(p + 2, NULL, 10) / 8;
    gvar *v = realloc(m->vars, sizeof *v * (size_t)(m->n_vars + 1));
    if (!v) return false;
    m->vars = v;
    gvar *g = &m->vars[m->n_vars];
    snprintf(g->name, sizeof g->name, "%s", name);
    g->size = bytes;
    g->data = calloc(1, bytes ? bytes : 1);
    if (!g->data) return false;
    m->n_vars++;
    const char *init = strchr(s, '{'), *eq = strchr(s, '=');
    const char *semi = strchr(s, ';');
    if (!init && eq && (!semi || eq < semi)) init = eq; /* a scalar "= v" */
    const char *stop = init ? strpbrk(init + 1, "};") : NULL;
    size_t at = 0;
    for (const char *p = init ? init + 1 : NULL; p && p < stop && at + elem <= bytes;) {
        char *endp;
        unsigned long long val = strtoull(p, &endp, 0);
        if (endp == p) break;
        memcpy(g->data + at, &val, elem); /* little endian */
        at += elem;
        p = endp;
        while (p < stop && (*p == ',' || isspace((unsigned char)*p))) p++;
    }
    return true;
}

void ptx_free(ptx_module *m) {
    if (!m) return;
    for (int i = 0; i < m->n_kernels; i++) {
        ptx_kernel *k = &m->kernels[i];
        for (int r = 0; r < k->n_regs; r++) free(k->regs[r]);
        free(k->regs);
        free(k->reg_hash);
        free(k->code);
        free(k->syms);
        free(k->rdecls);
    }
    for (int i = 0; i < m->n_vars; i++) free(m->vars[i].data);
    free(m->vars);
    free(m->kernels);
    free(m->mshared);
    free(m->mshared_size);
    free(m->mshared_align);
    free(m);
}

/* the position after the block that opens at `open` ('{'), NULL if unbalanced */
static const char *block_end(const char *open) {
    int depth = 0;
    for (const char *p = open; *p; p++) {
        if (*p == '{') depth++;
        if (*p == '}' && --depth == 0) return p;
    }
    return NULL;
}

ptx_module *ptx_load(const char *text, char *err, size_t err_size) {
    ptx_module *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    /* module scope first: globals and shared declarations */
    int depth = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '{') depth++;
        if (*p == '}') depth--;
        bool at_line = p == text || p[-1] == '\n';
        if (depth != 0 || !at_line) continue;
        if (strncmp(p, ".global ", 8) == 0 && !decode_global(m, p)) {
            snprintf(err, err_size, "module .global not understood");
            ptx_free(m);
            return NULL;
        }
        if (strncmp(p, ".shared ", 8) == 0) {
            int n = m->n_mshared;
            void *a = realloc(m->mshared, sizeof *m->mshared * (size_t)(n + 1));
            if (a) m->mshared = a;
            void *b = realloc(m->mshared_size, sizeof(size_t) * (size_t)(n + 1));
            if (b) m->mshared_size = b;
            void *c = realloc(m->mshared_align, sizeof(size_t) * (size_t)(n + 1));
            if (c) m->mshared_align = c;
            if (!a || !b || !c ||
                !parse_decl(p, m->mshared[n], &m->mshared_size[n], &m->mshared_align[n])) {
                snprintf(err, err_size, "module .shared not understood");
                ptx_free(m);
                return NULL;
            }
            m->n_mshared++;
        }
    }
    for (const char *e = strstr(text, ".entry "); e; e = strstr(e, ".entry ")) {
        ptx_kernel *ks = realloc(m->kernels, sizeof *ks * (size_t)(m->n_kernels + 1));
        if (!ks) {
            snprintf(err, err_size, "out of memory");
            ptx_free(m);
            return NULL;
        }
        m->kernels = ks;
        ptx_kernel *k = &m->kernels[m->n_kernels++];
        memset(k, 0, sizeof *k);
        const char *open = decode_header(k, e + 7);
        const char *close = open ? block_end(open) : NULL;
        bool ok = close != NULL;
        for (int i = 0; ok && i < m->n_mshared; i++)
            ok = add_symbol(k, m->mshared[i], SYM_SHARED, m->mshared_size[i], m->mshared_align[i]);
        k->m = m;
        if (ok) ok = decode_body(k, text, open + 1, close);
        if (!ok) {
            snprintf(err, err_size, "cannot decode .entry %.100s", e + 7);
            ptx_free(m);
            return NULL;
        }
        e = close;
    }
    return m;
}

int ptx_count(const ptx_module *m) {
    return m->n_kernels;
}
ptx_kernel *ptx_at(ptx_module *m, int i) {
    return &m->kernels[i];
}
const char *ptx_name(const ptx_kernel *k) {
    return k->name;
}
int ptx_n_params(const ptx_kernel *k) {
    return k->n_params;
}
int ptx_param_is_u64(const ptx_kernel *k, int i) {
    return k->param_t[i] == T_U64;
}
size_t ptx_shared_bytes(const ptx_kernel *k) {
    return k->shared_size;
}
unsigned ptx_maxntid(const ptx_kernel *k) {
    return k->maxntid;
}

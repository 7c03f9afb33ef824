/* mock_cuda_ptx.c - a PTX interpreter for the mock CUDA driver: the subset
 * NVRTC emits for libtinyc's kernels (see mock_cuda_ptx.h for the model).
 *
 * Decode: PTX text -> per .entry an array of instr (opcode, types, modifier,
 * up to 5 operands with registers numbered per kernel, immediates, special
 * registers, addresses [reg+off] / [symbol+off], vectors {a,b,c,d}), labels
 * resolved to instruction indices, .shared / .local declarations laid out
 * per kernel, initialized module .global variables copied into host memory.
 * Run: ptx_run loops over blocks; in each, threads run one after another
 * until bar.sync or ret, and the block resumes its threads once all live
 * ones have arrived. Values live in 64-bit register slots as raw bits (f32
 * in the low 32); each instruction reads them at its own type.
 * Arithmetic is C's IEEE float and double arithmetic (round to nearest, as
 * PTX's .rn); the approximations (ex2, lg2, sin, cos, rsqrt) use libm.
 */
#include "mock_cuda_ptx.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VEC    4
#define MAX_OPS    5
#define STEP_LIMIT (1LL << 31) /* instructions one thread may run in a launch */

typedef enum {
    T_NONE,
    T_PRED,
    T_B8,
    T_B16,
    T_B32,
    T_B64,
    T_U8,
    T_U16,
    T_U32,
    T_U64,
    T_S8,
    T_S16,
    T_S32,
    T_S64,
    T_F16,
    T_F32,
    T_F64,
} ptype;

static const char *const type_names[] = {
    [T_NONE] = "",   [T_PRED] = "pred", [T_B8] = "b8",   [T_B16] = "b16", [T_B32] = "b32",
    [T_B64] = "b64", [T_U8] = "u8",     [T_U16] = "u16", [T_U32] = "u32", [T_U64] = "u64",
    [T_S8] = "s8",   [T_S16] = "s16",   [T_S32] = "s32", [T_S64] = "s64", [T_F16] = "f16",
    [T_F32] = "f32", [T_F64] = "f64",
};

static int tbits(ptype t) {
    switch (t) {
    case T_PRED: return 1;
    case T_B8:
    case T_U8:
    case T_S8: return 8;
    case T_B16:
    case T_U16:
    case T_S16:
    case T_F16: return 16;
    case T_B32:
    case T_U32:
    case T_S32:
    case T_F32: return 32;
    case T_NONE:
    case T_B64:
    case T_U64:
    case T_S64:
    case T_F64: return 64;
    }
    return 64;
}

static bool tsigned(ptype t) {
    return t == T_S8 || t == T_S16 || t == T_S32 || t == T_S64;
}

typedef enum {
    OP_UNKNOWN,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_MAD,
    OP_FMA,
    OP_DIV,
    OP_REM,
    OP_NEG,
    OP_ABS,
    OP_MIN,
    OP_MAX,
    OP_AND,
    OP_OR,
    OP_XOR,
    OP_NOT,
    OP_CNOT,
    OP_SHL,
    OP_SHR,
    OP_BFI,
    OP_SELP,
    OP_SETP,
    OP_MOV,
    OP_LD,
    OP_ST,
    OP_CVT,
    OP_CVTA,
    OP_BRA,
    OP_RET,
    OP_BAR,
    OP_EX2,
    OP_LG2,
    OP_SIN,
    OP_COS,
    OP_RCP,
    OP_SQRT,
    OP_RSQRT,
} opcode;

static const struct {
    const char *name;
    opcode op;
} op_names[] = {
    {"add", OP_ADD},   {"sub", OP_SUB},     {"mul", OP_MUL}, {"mad", OP_MAD}, {"fma", OP_FMA},
    {"div", OP_DIV},   {"rem", OP_REM},     {"neg", OP_NEG}, {"abs", OP_ABS}, {"min", OP_MIN},
    {"max", OP_MAX},   {"and", OP_AND},     {"or", OP_OR},   {"xor", OP_XOR}, {"not", OP_NOT},
    {"cnot", OP_CNOT}, {"shl", OP_SHL},     {"shr", OP_SHR}, {"bfi", OP_BFI}, {"selp", OP_SELP},
    {"setp", OP_SETP}, {"mov", OP_MOV},     {"ld", OP_LD},   {"st", OP_ST},   {"cvt", OP_CVT},
    {"cvta", OP_CVTA}, {"bra", OP_BRA},     {"ret", OP_RET}, {"bar", OP_BAR}, {"barrier", OP_BAR},
    {"ex2", OP_EX2},   {"lg2", OP_LG2},     {"sin", OP_SIN}, {"cos", OP_COS}, {"rcp", OP_RCP},
    {"sqrt", OP_SQRT}, {"rsqrt", OP_RSQRT},
};

/* modifiers: mul/mad width, setp comparison, cvt rounding, ld/st space */
enum {
    M_NONE,
    M_LO,
    M_HI,
    M_WIDE,
    C_EQ,
    C_NE,
    C_LT,
    C_LE,
    C_GT,
    C_GE,
    C_EQU,
    C_NEU,
    C_LTU,
    C_LEU,
    C_GTU,
    C_GEU,
    C_NUM,
    C_NAN,
    R_RNI,
    R_RZI,
    R_RMI,
    R_RPI,
    S_GLOBAL,
    S_SHARED,
    S_LOCAL,
    S_PARAM,
};

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
    {"param", S_PARAM},
};

/* modifiers that change nothing here (rounding to nearest is what C does;
 * .nc, .uni, .sync, .aligned, .approx, .full are hints or defaults) */
static const char *const ignored_mods[] = {"rn",     "nc",   "uni", "sync", "aligned",
                                           "approx", "full", "to",  "ftz",  NULL};

typedef enum {
    K_NONE,
    K_REG,     /* reg */
    K_IMM,     /* imm (+ the base of symbol space sym) */
    K_SPECIAL, /* reg: 0-2 %tid, 3-5 %ntid, 6-8 %ctaid, 9-11 %nctaid */
    K_ADDR,    /* [reg + imm] or [symbol + imm] */
    K_VEC,     /* {vec[0..n_vec)} */
    K_LABEL,   /* imm: the instruction index */
} okind;

enum { SYM_NONE, SYM_SHARED, SYM_LOCAL, SYM_PARAM }; /* a symbol's space (globals: absolute) */

typedef struct {
    uint8_t kind;         /* okind */
    uint8_t sym;          /* K_IMM / K_ADDR without a register: the symbol's space */
    int8_t n_vec;         /* K_VEC */
    int32_t reg;          /* K_REG, K_SPECIAL, K_ADDR base register (-1: none) */
    int32_t vec[MAX_VEC]; /* K_VEC registers (-1: the sink `_`) */
    int64_t imm;          /* value, offset (param: index * 4096 + offset) or target */
} operand;

typedef struct {
    uint8_t op;      /* opcode */
    uint8_t t, t2;   /* the type; cvt's source type */
    uint8_t mod;     /* M_*, C_*, R_*, S_* */
    uint8_t bool_op; /* setp's .and/.or/.xor with a 4th operand (OP_AND...) or 0 */
    uint8_t vec;     /* ld/st vector width (1, 2, 4) */
    uint8_t n;       /* operands */
    bool guard_neg;  /* @!%p */
    int32_t guard;   /* predicate register or -1 */
    int32_t line;    /* line in the PTX text */
    operand o[MAX_OPS];
} instr;

typedef struct {
    char name[96];
    uint8_t space; /* SYM_SHARED, SYM_LOCAL */
    int64_t off;   /* offset in the block's shared buffer or the thread's depot */
} symbol;

typedef struct {
    char name[96];
    uint8_t *data; /* host copy, initialized */
    size_t size;
} gvar;

struct ptx_kernel {
    char name[128];
    instr *code; /* the body */
    int n_code, cap_code;
    char **regs; /* register names (index = slot) */
    int n_regs, cap_regs;
    int *reg_hash; /* open addressing over regs, -1 empty */
    int hash_cap;
    char params[64][96]; /* .param names in order */
    uint8_t param_t[64];
    int n_params;
    symbol *syms; /* .shared / .local declared in the body or the module */
    int n_syms, cap_syms;
    size_t shared_size, local_size;
    char unsupported[200]; /* the first line not understood ("" if none) */
    ptx_module *m;
};

struct ptx_module {
    ptx_kernel *kernels;
    int n_kernels;
    gvar *vars;
    int n_vars;
    char (*mshared)[96]; /* module-scope .shared: declarations copied into each kernel */
    size_t *mshared_size, *mshared_align;
    int n_mshared;
};

/* ---- decoding -------------------------------------------------------------------------- */

static unsigned hash_str(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* the slot of register `name` in k, made on first sight; -1 on out of memory */
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
            o->vec[o->n_vec++] = strcmp(p, "_") == 0 ? -1 : reg_slot(k, p);
            p[len] = save;
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
    char *parts[MAX_OPS + 1];
    int n = split_operands(ops, parts, MAX_OPS + 1);
    if (n < 0 || n > MAX_OPS) return false;
    in->n = (uint8_t)n;
    for (int i = 0; i < n; i++)
        if (!parse_operand(k, parts[i], &in->o[i], lb, k->n_code, in->op == OP_BRA)) return false;
    if (in->op == OP_BAR && n >= 1 && in->o[0].kind != K_IMM) return false;
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
            } else if (strncmp(s, ".reg", 4) != 0 && strncmp(s, ".pragma", 7) != 0 &&
                       strncmp(s, ".loc", 4) != 0) {
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
            k->param_t[k->n_params] = T_U64;
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
    const char *init = strchr(s, '{');
    const char *stop = init ? strchr(init, '}') : NULL;
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

ptx_kernel *ptx_find(ptx_module *m, const char *name) {
    for (int i = 0; m && i < m->n_kernels; i++)
        if (strcmp(m->kernels[i].name, name) == 0) return &m->kernels[i];
    return NULL;
}

/* ---- running --------------------------------------------------------------------------- */

typedef struct {
    uint64_t *r;     /* registers */
    uint8_t *local;  /* .local depot */
    int pc;          /* next instruction */
    bool is_done;    /* returned */
    unsigned tid[3]; /* %tid */
    int64_t steps;   /* instructions run */
} thread;

typedef struct {
    ptx_kernel *k;
    void **params;
    unsigned grid[3], block[3], cta[3];
    uint8_t *shared;
    ptx_range_fn ask_range;
    uintptr_t rbase[16]; /* global ranges seen this launch */
    size_t rsize[16];
    int n_ranges;
    char *err;
    size_t err_size;
} launch;

static inline float f32(uint64_t v) {
    uint32_t u = (uint32_t)v;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint64_t bits32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline double f64(uint64_t v) {
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}
static inline uint64_t bits64(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}
static inline uint64_t mask(uint64_t v, int bits) {
    return bits >= 64 ? v : v & ((1ULL << bits) - 1);
}
static inline int64_t sext(uint64_t v, int bits) {
    return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}
/* v at type t widened to 64 bits (sign-extended for signed types) */
static inline uint64_t ext(uint64_t v, ptype t) {
    int b = tbits(t);
    return tsigned(t) ? (uint64_t)sext(v, b) : mask(v, b);
}

/* float16 bits -> float, and float -> float16 rounded to nearest even */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, mant = h & 1023;
    if (e == 31) return f32(sign | 0x7f800000u | (mant << 13));
    if (e == 0) {
        float f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    return f32(sign | ((e + 112) << 23) | (mant << 13));
}

static uint16_t float_to_half(float f) {
    uint32_t u = (uint32_t)bits32(f), sign = (u >> 16) & 0x8000;
    float a = fabsf(f);
    if (isnan(f)) return (uint16_t)(sign | 0x7e00 | ((u >> 13) & 0x3ff));
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
    if (a < 6.103515625e-05f) { /* subnormal: multiples of 2^-24, rint rounds to even */
        return (uint16_t)(sign | (uint32_t)rintf(a * 16777216.0f));
    }
    uint32_t au = (uint32_t)bits32(a);
    uint32_t e = ((au >> 23) & 255) - 112, mant = au & 0x7fffff;
    uint32_t h = (e << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static int fail(launch *l, const thread *th, const instr *in, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(launch *l, const thread *th, const instr *in, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(l->err, l->err_size, "kernel '%s' block (%u,%u,%u) thread (%u,%u,%u), PTX line %d: %s",
             l->k->name, l->cta[0], l->cta[1], l->cta[2], th->tid[0], th->tid[1], th->tid[2],
             in ? in->line : 0, what);
    return -1;
}

static inline uint64_t special(const launch *l, const thread *th, int i) {
    if (i < 3) return th->tid[i];
    if (i < 6) return l->block[i - 3];
    if (i < 9) return l->cta[i - 6];
    return l->grid[i - 9];
}

static inline uint64_t sym_base(const launch *l, const thread *th, int sym) {
    return sym == SYM_SHARED  ? (uint64_t)(uintptr_t)l->shared
           : sym == SYM_LOCAL ? (uint64_t)(uintptr_t)th->local
                              : 0;
}

static inline uint64_t val(const launch *l, const thread *th, const operand *o) {
    switch (o->kind) {
    case K_REG: return th->r[o->reg];
    case K_IMM: return (uint64_t)o->imm + sym_base(l, th, o->sym);
    case K_SPECIAL: return special(l, th, o->reg);
    default: return 0;
    }
}

/* the bounds and alignment check of an access of n bytes at p in space */
static bool check_access(launch *l, const thread *th, const instr *in, int space, uint64_t p,
                         size_t n) {
    if (p % n != 0) {
        fail(l, th, in, "misaligned %zu-byte access at 0x%llx", n, (unsigned long long)p);
        return false;
    }
    uint64_t lo, hi;
    if (space == S_SHARED || space == S_LOCAL) {
        lo = space == S_SHARED ? (uint64_t)(uintptr_t)l->shared : (uint64_t)(uintptr_t)th->local;
        hi = lo + (space == S_SHARED ? l->k->shared_size : l->k->local_size);
        if (p >= lo && p + n <= hi) return true;
        fail(l, th, in, "%s access of %zu bytes at offset %lld outside its %llu bytes",
             space == S_SHARED ? "shared" : "local", n, (long long)(p - lo),
             (unsigned long long)(hi - lo));
        return false;
    }
    for (int i = 0; i < l->n_ranges; i++)
        if (p >= l->rbase[i] && p - l->rbase[i] < l->rsize[i]) {
            if (n <= l->rsize[i] - (p - l->rbase[i])) return true;
            fail(l, th, in, "global access of %zu bytes at offset %llu of a %zu-byte allocation", n,
                 (unsigned long long)(p - l->rbase[i]), l->rsize[i]);
            return false;
        }
    uintptr_t base = 0;
    size_t size = 0;
    bool found = l->ask_range && l->ask_range((uintptr_t)p, &base, &size);
    for (int i = 0; !found && i < l->k->m->n_vars; i++) {
        gvar *g = &l->k->m->vars[i];
        if (p >= (uint64_t)(uintptr_t)g->data && p - (uint64_t)(uintptr_t)g->data < g->size)
            base = (uintptr_t)g->data, size = g->size, found = true;
    }
    if (!found) {
        fail(l, th, in, "global access of %zu bytes at 0x%llx: not in any live allocation", n,
             (unsigned long long)p);
        return false;
    }
    int slot = l->n_ranges < 16 ? l->n_ranges++ : (int)(p % 16);
    l->rbase[slot] = base, l->rsize[slot] = size;
    if (n <= size - (p - base)) return true;
    fail(l, th, in, "global access of %zu bytes at offset %llu of a %zu-byte allocation", n,
         (unsigned long long)(p - base), size);
    return false;
}

static uint64_t load_bytes(const void *p, size_t n) {
    uint64_t v = 0;
    memcpy(&v, p, n); /* little endian */
    return v;
}

static bool compare(int c, ptype t, uint64_t a, uint64_t b) {
    if (t == T_F32 || t == T_F64) {
        double x = t == T_F32 ? f32(a) : f64(a), y = t == T_F32 ? f32(b) : f64(b);
        bool un = isnan(x) || isnan(y);
        switch (c) {
        case C_EQ: return !un && x == y;
        case C_NE: return !un && x != y;
        case C_LT: return !un && x < y;
        case C_LE: return !un && x <= y;
        case C_GT: return !un && x > y;
        case C_GE: return !un && x >= y;
        case C_EQU: return un || x == y;
        case C_NEU: return un || x != y;
        case C_LTU: return un || x < y;
        case C_LEU: return un || x <= y;
        case C_GTU: return un || x > y;
        case C_GEU: return un || x >= y;
        case C_NUM: return !un;
        case C_NAN: return un;
        default: return false;
        }
    }
    if (tsigned(t)) {
        int64_t x = sext(a, tbits(t)), y = sext(b, tbits(t));
        switch (c) {
        case C_EQ: return x == y;
        case C_NE: return x != y;
        case C_LT: return x < y;
        case C_LE: return x <= y;
        case C_GT: return x > y;
        case C_GE: return x >= y;
        default: return false;
        }
    }
    uint64_t x = mask(a, tbits(t)), y = mask(b, tbits(t));
    switch (c) {
    case C_EQ: return x == y;
    case C_NE: return x != y;
    case C_LT: return x < y;
    case C_LE: return x <= y;
    case C_GT: return x > y;
    case C_GE: return x >= y;
    default: return false;
    }
}

/* float -> integer type t with rounding r, saturating; NaN -> 0 */
static uint64_t float_to_int(double x, int r, ptype t) {
    if (isnan(x)) return 0;
    x = r == R_RNI ? nearbyint(x) : r == R_RMI ? floor(x) : r == R_RPI ? ceil(x) : trunc(x);
    int b = tbits(t);
    if (tsigned(t)) {
        double lo = -ldexp(1.0, b - 1), hi = ldexp(1.0, b - 1);
        if (x <= lo) return mask((uint64_t)1 << (b - 1), b);
        if (x >= hi) return mask(((uint64_t)1 << (b - 1)) - 1, b);
        return mask((uint64_t)(int64_t)x, b);
    }
    if (x <= 0) return 0;
    if (x >= ldexp(1.0, b)) return mask(~0ULL, b);
    return mask((uint64_t)x, b);
}

static uint64_t cvt(const instr *in, uint64_t v) {
    ptype d = (ptype)in->t, s = (ptype)in->t2;
    bool df = d == T_F16 || d == T_F32 || d == T_F64, sf = s == T_F16 || s == T_F32 || s == T_F64;
    if (sf) {
        double x = s == T_F16 ? half_to_float((uint16_t)v) : s == T_F32 ? f32(v) : f64(v);
        if (d == T_F16) return float_to_half((float)x); /* f64 -> f16 goes through f32 */
        if (d == T_F32) return bits32((float)x);
        if (d == T_F64) return bits64(x);
        return float_to_int(x, in->mod, d);
    }
    uint64_t w = ext(v, s);
    if (df) {
        float xf = tsigned(s) ? (float)(int64_t)w : (float)w;
        double xd = tsigned(s) ? (double)(int64_t)w : (double)w;
        if (d == T_F16) return float_to_half(xf);
        return d == T_F32 ? bits32(xf) : bits64(xd);
    }
    return mask(w, tbits(d));
}

/* integer and float arithmetic of one ALU instruction */
static uint64_t alu(const instr *in, uint64_t a, uint64_t b, uint64_t c) {
    ptype t = (ptype)in->t;
    int bits = tbits(t);
    if (t == T_F32) {
        float x = f32(a), y = f32(b);
        switch (in->op) {
        case OP_ADD: return bits32(x + y);
        case OP_SUB: return bits32(x - y);
        case OP_MUL: return bits32(x * y);
        case OP_DIV: return bits32(x / y);
        case OP_FMA:
        case OP_MAD: return bits32(fmaf(x, y, f32(c)));
        case OP_NEG: return bits32(-x);
        case OP_ABS: return bits32(fabsf(x));
        case OP_MIN: return bits32(fminf(x, y));
        case OP_MAX: return bits32(fmaxf(x, y));
        case OP_EX2: return bits32(exp2f(x));
        case OP_LG2: return bits32(log2f(x));
        case OP_SIN: return bits32(sinf(x));
        case OP_COS: return bits32(cosf(x));
        case OP_RCP: return bits32(1.0f / x);
        case OP_SQRT: return bits32(sqrtf(x));
        case OP_RSQRT: return bits32(1.0f / sqrtf(x));
        default: return 0;
        }
    }
    if (t == T_F64) {
        double x = f64(a), y = f64(b);
        switch (in->op) {
        case OP_ADD: return bits64(x + y);
        case OP_SUB: return bits64(x - y);
        case OP_MUL: return bits64(x * y);
        case OP_DIV: return bits64(x / y);
        case OP_FMA:
        case OP_MAD: return bits64(fma(x, y, f64(c)));
        case OP_NEG: return bits64(-x);
        case OP_ABS: return bits64(fabs(x));
        case OP_MIN: return bits64(fmin(x, y));
        case OP_MAX: return bits64(fmax(x, y));
        case OP_RCP: return bits64(1.0 / x);
        case OP_SQRT: return bits64(sqrt(x));
        default: return 0;
        }
    }
    bool sg = tsigned(t);
    uint64_t ua = ext(a, t), ub = ext(b, t);
    int64_t sa = (int64_t)ua, sb = (int64_t)ub;
    switch (in->op) {
    case OP_ADD: return mask(ua + ub, bits);
    case OP_SUB: return mask(ua - ub, bits);
    case OP_MUL:
    case OP_MAD: {
        uint64_t add = in->op == OP_MAD ? c : 0;
        if (in->mod == M_WIDE) return mask(ua * ub + add, 2 * bits);
        if (in->mod == M_HI) {
            uint64_t hi;
            if (bits == 64)
                hi = sg ? (uint64_t)(((__int128)sa * sb) >> 64)
                        : (uint64_t)(((unsigned __int128)ua * ub) >> 64);
            else hi = sg ? (uint64_t)((sa * sb) >> bits) : (ua * ub) >> bits;
            return mask(hi + add, bits);
        }
        return mask(ua * ub + add, bits);
    }
    case OP_DIV:
        if (ub == 0) return mask(~0ULL, bits);
        if (sg) return sb == -1 ? mask((uint64_t)0 - ua, bits) : mask((uint64_t)(sa / sb), bits);
        return mask(ua / ub, bits);
    case OP_REM:
        if (ub == 0) return mask(ua, bits);
        if (sg) return sb == -1 ? 0 : mask((uint64_t)(sa % sb), bits);
        return mask(ua % ub, bits);
    case OP_NEG: return mask((uint64_t)0 - ua, bits);
    case OP_ABS: return mask(sa < 0 ? (uint64_t)0 - ua : ua, bits);
    case OP_MIN: return mask(sg ? (sa < sb ? ua : ub) : (ua < ub ? ua : ub), bits);
    case OP_MAX: return mask(sg ? (sa > sb ? ua : ub) : (ua > ub ? ua : ub), bits);
    case OP_AND: return t == T_PRED ? (a & b & 1) : mask(a & b, bits);
    case OP_OR: return t == T_PRED ? ((a | b) & 1) : mask(a | b, bits);
    case OP_XOR: return t == T_PRED ? ((a ^ b) & 1) : mask(a ^ b, bits);
    case OP_NOT: return t == T_PRED ? (~a & 1) : mask(~a, bits);
    case OP_CNOT: return mask(a, bits) == 0;
    case OP_SHL: {
        uint64_t n = mask(b, 32);
        return n >= (uint64_t)bits ? 0 : mask(a << n, bits);
    }
    case OP_SHR: {
        uint64_t n = mask(b, 32);
        if (sg) return mask((uint64_t)(sa >> (n >= (uint64_t)bits ? bits - 1 : (int)n)), bits);
        return n >= (uint64_t)bits ? 0 : mask(ua >> n, bits);
    }
    default: return 0;
    }
}

/* runs th until ret (0), bar.sync (1) or an error (-1) */
static int run_thread(launch *l, thread *th) {
    const instr *code = l->k->code;
    uint64_t *r = th->r;
    for (;;) {
        const instr *in = &code[th->pc++];
        if (++th->steps > STEP_LIMIT)
            return fail(l, th, in, "more than %lld instructions (a runaway loop?)", STEP_LIMIT);
        if (in->guard >= 0 && (r[in->guard] != 0) == in->guard_neg) continue;
        const operand *o = in->o;
        switch ((opcode)in->op) {
        case OP_BRA: th->pc = (int)o[0].imm; break;
        case OP_RET: th->is_done = true; return 0;
        case OP_BAR: return 1;
        case OP_CVTA:
        case OP_MOV:
            if (o[0].kind == K_VEC || o[1].kind == K_VEC) { /* pack / unpack */
                int part = tbits((ptype)in->t) / (o[0].kind == K_VEC ? o[0].n_vec : o[1].n_vec);
                if (o[0].kind == K_VEC) {
                    uint64_t v = val(l, th, &o[1]);
                    for (int i = 0; i < o[0].n_vec; i++)
                        if (o[0].vec[i] >= 0) r[o[0].vec[i]] = mask(v >> (i * part), part);
                } else {
                    uint64_t v = 0;
                    for (int i = o[1].n_vec - 1; i >= 0; i--)
                        v = (v << part) | mask(o[1].vec[i] >= 0 ? r[o[1].vec[i]] : 0, part);
                    r[o[0].reg] = v;
                }
                break;
            }
            r[o[0].reg] = mask(val(l, th, &o[1]), tbits((ptype)in->t));
            break;
        case OP_SELP:
            r[o[0].reg] = val(l, th, &o[3]) ? val(l, th, &o[1]) : val(l, th, &o[2]);
            break;
        case OP_SETP: {
            bool p = compare(in->mod, (ptype)in->t, val(l, th, &o[1]), val(l, th, &o[2]));
            if (in->bool_op) {
                bool q = val(l, th, &o[3]) != 0;
                p = in->bool_op == OP_AND ? (p && q) : in->bool_op == OP_OR ? (p || q) : (p != q);
            }
            r[o[0].reg] = p;
            break;
        }
        case OP_CVT: r[o[0].reg] = cvt(in, val(l, th, &o[1])); break;
        case OP_BFI: {
            uint64_t a = val(l, th, &o[1]), b = val(l, th, &o[2]);
            unsigned pos = (unsigned)val(l, th, &o[3]) & 255,
                     len = (unsigned)val(l, th, &o[4]) & 255;
            int bits = tbits((ptype)in->t);
            uint64_t d = b;
            if (len > 0 && pos < (unsigned)bits) {
                if (pos + len > (unsigned)bits) len = (unsigned)bits - pos;
                uint64_t m = mask(~0ULL, (int)len) << pos;
                d = (b & ~m) | ((a << pos) & m);
            }
            r[o[0].reg] = mask(d, bits);
            break;
        }
        case OP_LD:
        case OP_ST: {
            const operand *addr = in->op == OP_LD ? &o[1] : &o[0];
            const operand *reg = in->op == OP_LD ? &o[0] : &o[1];
            size_t n = (size_t)tbits((ptype)in->t) / 8;
            if (in->mod == S_PARAM) {
                int idx = (int)(addr->imm / 4096);
                if (in->op != OP_LD || addr->sym != SYM_PARAM || idx >= l->k->n_params)
                    return fail(l, th, in, "param access not understood");
                r[reg->reg] = ext(load_bytes((const uint8_t *)l->params[idx] + addr->imm % 4096, n),
                                  (ptype)in->t);
                break;
            }
            uint64_t p =
                (addr->reg >= 0 ? r[addr->reg] : sym_base(l, th, addr->sym)) + (uint64_t)addr->imm;
            int space = in->mod ? in->mod : S_GLOBAL;
            if (!check_access(l, th, in, space, p, n * in->vec)) return -1;
            for (int i = 0; i < in->vec; i++) {
                int rr = reg->kind == K_VEC ? reg->vec[i] : reg->reg;
                uint8_t *at = (uint8_t *)(uintptr_t)p + (size_t)i * n;
                if (in->op == OP_LD) {
                    if (rr >= 0) r[rr] = ext(load_bytes(at, n), (ptype)in->t);
                } else {
                    uint64_t v = reg->kind == K_VEC ? (rr >= 0 ? r[rr] : 0) : val(l, th, reg);
                    memcpy(at, &v, n);
                }
            }
            break;
        }
        case OP_ADD:
        case OP_SUB:
        case OP_MUL:
        case OP_MAD:
        case OP_FMA:
        case OP_DIV:
        case OP_REM:
        case OP_NEG:
        case OP_ABS:
        case OP_MIN:
        case OP_MAX:
        case OP_AND:
        case OP_OR:
        case OP_XOR:
        case OP_NOT:
        case OP_CNOT:
        case OP_SHL:
        case OP_SHR:
        case OP_EX2:
        case OP_LG2:
        case OP_SIN:
        case OP_COS:
        case OP_RCP:
        case OP_SQRT:
        case OP_RSQRT:
            r[o[0].reg] = alu(in, val(l, th, &o[1]), in->n > 2 ? val(l, th, &o[2]) : 0,
                              in->n > 3 ? val(l, th, &o[3]) : 0);
            break;
        case OP_UNKNOWN: return fail(l, th, in, "unknown instruction");
        }
    }
}

int ptx_run(ptx_kernel *k, const unsigned grid[3], const unsigned block[3], void **params,
            ptx_range_fn ask_range, char *err, size_t err_size) {
    launch l = {.k = k, .params = params, .ask_range = ask_range, .err = err, .err_size = err_size};
    memcpy(l.grid, grid, sizeof l.grid);
    memcpy(l.block, block, sizeof l.block);
    if (k->unsupported[0]) {
        snprintf(err, err_size, "kernel '%s' cannot be interpreted: %s", k->name, k->unsupported);
        return -2;
    }
    size_t n_threads = (size_t)block[0] * block[1] * block[2], n_regs = (size_t)k->n_regs + 1;
    thread *ths = calloc(n_threads, sizeof *ths);
    uint64_t *regs = calloc(n_threads * n_regs, sizeof *regs);
    uint8_t *locals = calloc(n_threads, k->local_size ? k->local_size : 1);
    l.shared = malloc(k->shared_size ? k->shared_size : 1);
    int rc = 0;
    if (!ths || !regs || !locals || !l.shared) {
        snprintf(err, err_size, "kernel '%s': out of host memory for %zu threads", k->name,
                 n_threads);
        rc = -1;
    }
    for (unsigned bz = 0; rc == 0 && bz < grid[2]; bz++)
        for (unsigned by = 0; rc == 0 && by < grid[1]; by++)
            for (unsigned bx = 0; rc == 0 && bx < grid[0]; bx++) {
                l.cta[0] = bx, l.cta[1] = by, l.cta[2] = bz;
                memset(l.shared, 0xff, k->shared_size ? k->shared_size : 1);
                for (size_t t = 0; t < n_threads; t++) {
                    thread *th = &ths[t];
                    memset(th, 0, sizeof *th);
                    th->r = regs + t * n_regs;
                    th->local = locals + t * (k->local_size ? k->local_size : 1);
                    th->tid[0] = (unsigned)(t % block[0]);
                    th->tid[1] = (unsigned)(t / block[0] % block[1]);
                    th->tid[2] = (unsigned)(t / ((size_t)block[0] * block[1]));
                }
                for (bool is_waiting = true; is_waiting && rc == 0;) {
                    is_waiting = false; /* run every live thread to its next barrier or end */
                    for (size_t t = 0; t < n_threads && rc == 0; t++) {
                        if (ths[t].is_done) continue;
                        int s = run_thread(&l, &ths[t]);
                        if (s < 0) rc = -1;
                        if (s == 1) is_waiting = true;
                    }
                }
            }
    free(ths);
    free(regs);
    free(locals);
    free(l.shared);
    return rc;
}

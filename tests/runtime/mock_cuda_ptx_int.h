/* mock_cuda_ptx_int.h - the PTX interpreter's internal types, shared by its
 * decoder (mock_cuda_ptx_decode.c: PTX text -> instr arrays) and its runner
 * (mock_cuda_ptx_run.c: instr arrays -> a grid of threads). The public
 * interface is mock_cuda_ptx.h.
 */
#ifndef TC_MOCK_CUDA_PTX_INT_H
#define TC_MOCK_CUDA_PTX_INT_H

#include "mock_cuda_ptx.h"

#include <stdbool.h>
#include <stdint.h>

#define MAX_VEC 4 /* lanes of a vector operand {a,b,c,d} */
#define MAX_OPS 5 /* operands of one instruction (bfi has 5) */

typedef enum {
    T_NONE, /* no type given */
    T_PRED, /* predicate (0 or 1) */
    T_B8,   /* untyped bits */
    T_B16,
    T_B32,
    T_B64,
    T_U8, /* unsigned */
    T_U16,
    T_U32,
    T_U64,
    T_S8, /* signed (sign-extended when widened) */
    T_S16,
    T_S32,
    T_S64,
    T_F16, /* half (conversions only) */
    T_F32, /* float */
    T_F64, /* double */
} ptype;

static inline int tbits(ptype t) {
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

static inline bool tsigned(ptype t) {
    return t == T_S8 || t == T_S16 || t == T_S32 || t == T_S64;
}

typedef enum {
    OP_UNKNOWN, /* not decoded */
    OP_ADD,     /* d = a + b */
    OP_SUB,     /* d = a - b */
    OP_MUL,     /* .lo/.hi/.wide for ints */
    OP_MAD,     /* d = a * b + c (.lo/.hi/.wide) */
    OP_FMA,     /* fused, rounded once */
    OP_DIV,     /* ints: by 0 gives all ones */
    OP_REM,     /* ints */
    OP_NEG,
    OP_ABS,
    OP_MIN, /* floats: the non-NaN operand */
    OP_MAX,
    OP_AND, /* bitwise; logical on .pred */
    OP_OR,
    OP_XOR,
    OP_NOT,
    OP_CNOT, /* d = a == 0 */
    OP_SHL,  /* shift >= width: 0 */
    OP_SHR,  /* .s: arithmetic */
    OP_BFI,  /* bit-field insert a into b at c, d bits */
    OP_PRMT, /* byte permute of {b, a} by c's four selectors (default mode) */
    OP_SELP, /* d = p ? a : b */
    OP_SETP, /* p = a CMP b [BOOL q] */
    OP_MOV,  /* also vector pack/unpack */
    OP_LD,   /* .global/.shared/.local/.param, .v2/.v4 */
    OP_ST,
    OP_CVT,  /* between any two types, rounding */
    OP_CVTA, /* identity: every space is host memory */
    OP_BRA,  /* to a label */
    OP_RET,  /* the thread ends */
    OP_BAR,  /* bar.sync 0 */
    OP_EX2,  /* libm exp2f */
    OP_LG2,  /* libm log2f */
    OP_SIN,  /* libm sinf */
    OP_COS,  /* libm cosf */
    OP_RCP,  /* 1 / a */
    OP_SQRT,
    OP_RSQRT, /* 1 / sqrt(a) */
} opcode;

/* modifiers: mul/mad width, setp comparison, cvt rounding, ld/st space */
enum {
    M_NONE, /* no modifier */
    M_LO,   /* mul/mad: the low half */
    M_HI,   /* the high half */
    M_WIDE, /* the double-width product */
    C_EQ,   /* setp: ordered (false on NaN) */
    C_NE,
    C_LT,  /* also .lo on unsigned */
    C_LE,  /* also .ls */
    C_GT,  /* also .hi */
    C_GE,  /* also .hs */
    C_EQU, /* unordered (true on NaN) */
    C_NEU,
    C_LTU,
    C_LEU,
    C_GTU,
    C_GEU,
    C_NUM,    /* neither is NaN */
    C_NAN,    /* either is NaN */
    R_RNI,    /* cvt: to an integral value, nearest even */
    R_RZI,    /* toward zero */
    R_RMI,    /* toward -inf */
    R_RPI,    /* toward +inf */
    S_GLOBAL, /* ld/st: device memory (also with no space) */
    S_SHARED, /* the block's buffer */
    S_LOCAL,  /* the thread's depot */
    S_PARAM,  /* kernel parameters */
    M_FTZ,    /* rcp.approx.ftz.f64 (CUDA's double math): subnormals flushed to 0 */
};

typedef enum {
    K_NONE,    /* absent */
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
    uint8_t op;         /* opcode */
    uint8_t t, t2;      /* the type; cvt's source type */
    uint8_t mod;        /* M_*, C_*, R_*, S_* */
    uint8_t bool_op;    /* setp's .and/.or/.xor with a 4th operand (OP_AND...) or 0 */
    uint8_t vec;        /* ld/st vector width (1, 2, 4) */
    uint8_t n;          /* operands */
    bool guard_neg;     /* @!%p */
    int32_t guard;      /* predicate register or -1 */
    int32_t line;       /* line in the PTX text */
    operand o[MAX_OPS]; /* destination first (st: the address first) */
} instr;

typedef struct {
    char name[96]; /* as declared */
    uint8_t space; /* SYM_SHARED, SYM_LOCAL */
    int64_t off;   /* offset in the block's shared buffer or the thread's depot */
} symbol;

typedef struct {
    char name[96]; /* as declared */
    uint8_t *data; /* host copy, initialized */
    size_t size;   /* bytes */
} gvar;

typedef struct {
    char prefix[32]; /* "%f" of "%f<57>", or a whole name ("%SP") */
    int count;       /* registers prefix0 .. prefix<count-1>; -1: the name alone */
} reg_decl;

struct ptx_kernel {
    char name[128];                 /* the .entry's name */
    instr *code;                    /* the body, ending in a ret */
    int n_code, cap_code;           /* used, allocated */
    char **regs;                    /* register names (index = slot) */
    int n_regs, cap_regs;           /* used, allocated */
    int *reg_hash;                  /* open addressing over regs, -1 empty */
    int hash_cap;                   /* a power of two */
    char params[64][96];            /* .param names in order */
    uint8_t param_t[64];            /* their types (T_NONE: none given) */
    int n_params;                   /* how many */
    symbol *syms;                   /* .shared / .local declared in the body or the module */
    int n_syms, cap_syms;           /* used, allocated */
    size_t shared_size, local_size; /* bytes per block, per thread */
    unsigned maxntid;               /* .maxntid x*y*z (0: none) */
    reg_decl *rdecls;               /* what .reg lines declared */
    int n_rdecls;
    char unsupported[200]; /* the first line not understood ("" if none) */
    ptx_module *m;         /* the module it is in */
};

struct ptx_module {
    ptx_kernel *kernels; /* .entry kernels in order */
    int n_kernels;       /* how many */
    gvar *vars;          /* module .global variables */
    int n_vars;          /* how many */
    char (*mshared)[96]; /* module-scope .shared: declarations copied into each kernel */
    size_t *mshared_size, *mshared_align; /* their bytes and alignment */
    int n_mshared;                        /* how many */
};

#endif /* TC_MOCK_CUDA_PTX_INT_H */

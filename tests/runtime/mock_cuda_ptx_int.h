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

typedef struct {
    char prefix[32]; /* "%f" of "%f<57>", or a whole name ("%SP") */
    int count;       /* registers prefix0 .. prefix<count-1>; -1: the name alone */
} reg_decl;

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
    unsigned maxntid; /* .maxntid x*y*z (0: none) */
    reg_decl *rdecls; /* what .reg lines declared */
    int n_rdecls;
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

#endif /* TC_MOCK_CUDA_PTX_INT_H */

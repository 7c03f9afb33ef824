/* null_walk.h - the table null_walk_gen.py writes: one thunk per TC_API
 * function that takes a pointer, calling it with every pointer NULL */
#ifndef TC_NULL_WALK_H
#define TC_NULL_WALK_H

typedef struct {
    const char *name; /* the function, as tinyc.h spells it */
    void (*call)(void);
} null_walk_call;

extern const null_walk_call null_walk_calls[];
extern const int null_walk_n;

#endif

/*
 * acl/acl_rt_allocator.h — present so that programs written against CANN's header layout
 * (where acl/acl_rt.h includes this file) compile. npusim implements none of ACL's external
 * allocator registration functions (aclrtAllocatorCreateDesc, ...): device memory comes from
 * aclrtMalloc and stream-ordered pools (aclrtMemPoolCreate). The allocator handle types are
 * declared in acl/acl_base.h.
 */
#ifndef NPUSIM_ACL_ACL_RT_ALLOCATOR_H_
#define NPUSIM_ACL_ACL_RT_ALLOCATOR_H_

#include "acl_base.h"

#endif /* NPUSIM_ACL_ACL_RT_ALLOCATOR_H_ */

// Linux's epoll and eventfd, which Glibc's Swift module does not include: serve's hang-up watch waits on the event
// streams' sockets, and feedsync-bench's w10 multiplexes thousands of streams with one epoll instance.
#include <sys/epoll.h>
#include <sys/eventfd.h>

// A rank woken beside a rank that never pauses, both pinned to CPU 0 (round 15): after sleeping (in naps of
// NAP_US, or one sleep when 0) for SLEEP_MS it computes a task of TASK_MS alone-time; prints the mean stretch and the
// involuntary switches per task over 40 tasks. gcc -O1 -pthread wake_probe.c -o wake_probe; ./wake_probe 50 20 7
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
#include <stdatomic.h>
static atomic_int stop;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void* hog(void*a){pin(0);volatile double x=0;while(!stop)x+=1;return 0;}
static double spin_work(double secs_solo, double rate){ /* do fixed work: count iterations */ volatile double x=0; long n=(long)(secs_solo*rate); for(long i=0;i<n;i++) x+=1; return x;}
int main(int argc,char**argv){
  double nap_us=atof(argv[1]), sleep_ms=atof(argv[2]), task_ms=atof(argv[3]);
  pin(0);
  /* calibrate rate alone */
  double t0=now(); spin_work(0.05,1e9); double r=1e9*0.05/(now()-t0);
  pthread_t h; pthread_create(&h,0,hog,0);
  struct timespec nap={0,(long)(nap_us*1000)};
  double sum=0; int N=40; long pre=0;
  for(int i=0;i<N;i++){
    double s=now(); if(nap_us>0){while(now()-s<sleep_ms*1e-3) nanosleep(&nap,0);} else {struct timespec sl={0,(long)(sleep_ms*1e6)}; nanosleep(&sl,0);}
    struct rusage u0,u1; getrusage(RUSAGE_THREAD,&u0);
    double a=now(); spin_work(task_ms*1e-3,r); double b=now();
    getrusage(RUSAGE_THREAD,&u1); pre+=u1.ru_nivcsw-u0.ru_nivcsw;
    sum+=(b-a)/(task_ms*1e-3);
  }
  stop=1; pthread_join(h,0);
  printf("nap %g us, slept %g ms, task %g ms: stretch %.2f, preempted %.1f per task\n",nap_us,sleep_ms,task_ms,sum/N,(double)pre/N);
}

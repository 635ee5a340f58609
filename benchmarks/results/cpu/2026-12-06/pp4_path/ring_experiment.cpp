// The standalone experiment behind doctor's ring probe (README, "Why"): R ranks pass R tokens round a ring, each
// waiting politely (naps of 2-100 us) for its predecessor's token, computing a fixed count of m = 4 matmuls
// (weights rotating over 48 MiB; the last rank LAST_X times as many) and sending on; every call notes
// sched_getcpu(). Writes $RING_OUT/rN.txt (phases, then (time, CPU) after each call); ring_read.py reads them.
//   mpicxx -O2 -march=native -o ring ring_experiment.cpp
//   RING_OUT=DIR mpirun --oversubscribe -np 4 -x RING_OUT ./ring SOLO_MS LAST_X SECONDS
#include <mpi.h>
#include <sched.h>
#include <time.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <thread>
#include <chrono>
#include <random>
static long long now_ns(){ timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1000000000LL+t.tv_nsec; }
static void polite(MPI_Request* r){ int done=0; auto p=std::chrono::microseconds(2); for(;;){ MPI_Test(r,&done,MPI_STATUS_IGNORE); if(done) return; std::this_thread::sleep_for(p); p=std::min(p*2,std::chrono::microseconds(100)); } }
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int rank,R; MPI_Comm_rank(MPI_COMM_WORLD,&rank); MPI_Comm_size(MPI_COMM_WORLD,&R);
  double solo_ms = atof(argv[1]); double last_x = atof(argv[2]); double secs = atof(argv[3]); int T = argc>4?atoi(argv[4]):R;
  const int M=4,N=1024,K=1024,CH=12; std::vector<float> W(size_t(CH)*N*K); std::mt19937 g(rank); std::uniform_real_distribution<float> u(-1,1); for(auto&v:W) v=u(g);
  std::vector<float> x(M*K,0.5f), y(M*N); int chunk=0;
  auto call=[&]{ const float* w=W.data()+size_t(chunk)*N*K; chunk=(chunk+1)%CH; for(int i=0;i<M;++i){ float* yy=y.data()+i*N; for(int n=0;n<N;++n) yy[n]=0; for(int k=0;k<K;++k){ float a=x[i*K+k]; const float* ww=w+size_t(k)*N; for(int n=0;n<N;++n) yy[n]+=a*ww[n]; } } };
  // calibrate solo, one rank at a time
  double call_ms=0;
  for(int r=0;r<R;++r){ MPI_Barrier(MPI_COMM_WORLD); if(r==rank){ for(int i=0;i<20;++i) call(); long long t=now_ns(); for(int i=0;i<60;++i) call(); call_ms=(now_ns()-t)/60e6; } }
  MPI_Allreduce(MPI_IN_PLACE,&call_ms,1,MPI_DOUBLE,MPI_MAX,MPI_COMM_WORLD); // same count everywhere
  int calls = int(solo_ms/call_ms+0.5); if(rank==R-1) calls=int(solo_ms*last_x/call_ms+0.5);
  MPI_Barrier(MPI_COMM_WORLD);
  long long start=now_ns(), end=start+(long long)(secs*1e9);
  std::vector<long long> ph; std::vector<long long> samp; int have = rank==0?T:0; int tok=0;
  int prev=(rank+R-1)%R, next=(rank+1)%R; int buf[16]; int sbuf[16]; std::vector<MPI_Request> sends;
  MPI_Request rr; MPI_Irecv(buf,16,MPI_INT,prev,0,MPI_COMM_WORLD,&rr);
  bool stop=false;
  while(true){
    if(have==0){ polite(&rr); if(buf[0]<0){ stop=true; } else have++; MPI_Irecv(buf,16,MPI_INT,prev,0,MPI_COMM_WORLD,&rr); if(stop) break; }
    else { int done=0; MPI_Test(&rr,&done,MPI_STATUS_IGNORE); if(done){ if(buf[0]<0) break; have++; MPI_Irecv(buf,16,MPI_INT,prev,0,MPI_COMM_WORLD,&rr);} }
    long long b=now_ns(); for(int i=0;i<calls;++i){ call(); samp.push_back(now_ns()); samp.push_back(sched_getcpu()); } long long e=now_ns();
    ph.push_back(b); ph.push_back(e); have--; tok++;
    bool fin = (rank==0 && e>end);
    sbuf[0]= fin? -1 : tok; MPI_Request s; MPI_Isend(sbuf,16,MPI_INT,next,0,MPI_COMM_WORLD,&s); MPI_Request_free(&s);
    if(fin) { break; }
  }
  // pass stop around
  if(rank!=0){ sbuf[0]=-1; MPI_Send(sbuf,16,MPI_INT,next,0,MPI_COMM_WORLD);} else { /* drain until -1 arrives */ for(;;){ polite(&rr); if(buf[0]<0) break; MPI_Irecv(buf,16,MPI_INT,prev,0,MPI_COMM_WORLD,&rr);} }
  char fn[256]; snprintf(fn,256,"%s/r%d.txt",getenv("RING_OUT"),rank); FILE* f=fopen(fn,"w");
  fprintf(f,"calls %d call_ms %.4f\n",calls,call_ms);
  for(size_t i=0;i<ph.size();i+=2) fprintf(f,"P %lld %lld\n",ph[i]-start,ph[i+1]-start);
  for(size_t i=0;i<samp.size();i+=2) fprintf(f,"S %lld %lld\n",samp[i]-start,samp[i+1]);
  fclose(f); MPI_Finalize(); }

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdint.h>
/* Random page visits over a mix of malloc'd blocks: verify, then rewrite. */
#define NB 400
int main(int argc,char**argv){
  unsigned seed=1; size_t iters=argc>1?atol(argv[1]):200000;
  unsigned char *blk[NB]; size_t len[NB]; unsigned ver[NB];
  for(int i=0;i<NB;i++){len[i]=4096*(1+rand_r(&seed)%12)+rand_r(&seed)%4096; blk[i]=malloc(len[i]); ver[i]=i; memset(blk[i],(unsigned char)i,len[i]);}
  int bad=0;
  for(size_t it=0;it<iters && bad<5;it++){
    int i=rand_r(&seed)%NB;
    unsigned char want=(unsigned char)ver[i];
    for(size_t k=0;k<len[i];k+=97) if(blk[i][k]!=want){printf("it %zu blk %d (len %zu) off %zu: %d want %d\n",it,i,len[i],k,blk[i][k],want);bad++;break;}
    int op=rand_r(&seed)%10;
    if(op==0){free(blk[i]); len[i]=4096*(1+rand_r(&seed)%24)+rand_r(&seed)%4096; blk[i]=malloc(len[i]);}
    else if(op==1){len[i]=len[i]/2+1+rand_r(&seed)%(len[i]*2); blk[i]=realloc(blk[i],len[i]);}
    ver[i]=(unsigned)(it*7+1); memset(blk[i],(unsigned char)ver[i],len[i]);
  }
  printf("bad %d\n",bad); return bad!=0;
}
